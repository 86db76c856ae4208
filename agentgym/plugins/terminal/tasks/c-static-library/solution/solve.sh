#!/usr/bin/env bash
# Reference Makefile: objects -> archive -> program, with header dependencies.
set -euo pipefail
cd /app/strutil
printf '%s\n' \
  'CC = gcc' \
  'CFLAGS = -Wall -Wextra -O2 -Iinclude' \
  'LIBOBJS = src/reverse.o src/upper.o src/vowels.o' \
  '' \
  'all: demo' \
  '' \
  'libstrutil.a: $(LIBOBJS)' \
  '	rm -f $@' \
  '	ar rcs $@ $^' \
  '' \
  'demo: app/main.o libstrutil.a' \
  '	$(CC) $(CFLAGS) -o $@ app/main.o -L. -lstrutil' \
  '' \
  '%.o: %.c include/strutil.h' \
  '	$(CC) $(CFLAGS) -c $< -o $@' \
  '' \
  'clean:' \
  '	rm -f libstrutil.a demo $(LIBOBJS) app/main.o' \
  '' \
  '.PHONY: all clean' > Makefile
make
./demo hello
