#!/usr/bin/env bash
# Plausible mistake: demo does not list the library as a prerequisite, so after a library
# source changes, make rebuilds libstrutil.a but never relinks demo (it stays stale).
set -euo pipefail
cd /app/strutil
printf '%s\n' \
  'CC = gcc' \
  'CFLAGS = -Wall -Wextra -O2 -Iinclude' \
  'LIBOBJS = src/reverse.o src/upper.o src/vowels.o' \
  '' \
  'all: libstrutil.a demo' \
  '' \
  'libstrutil.a: $(LIBOBJS)' \
  '	ar rcs $@ $^' \
  '' \
  'demo: app/main.c' \
  '	$(CC) $(CFLAGS) -o $@ app/main.c -L. -lstrutil' \
  '' \
  '%.o: %.c include/strutil.h' \
  '	$(CC) $(CFLAGS) -c $< -o $@' \
  '' \
  'clean:' \
  '	rm -f libstrutil.a demo $(LIBOBJS)' \
  '' \
  '.PHONY: all clean' > Makefile
make
