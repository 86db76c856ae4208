#!/usr/bin/env bash
# Reference: tabs for recipes, the right include folder, every object, libm, a full clean.
set -euo pipefail
cd /app/calc
printf '%s\n' \
  'CC = gcc' \
  'CFLAGS = -Wall -O2 -Iinclude' \
  'LDLIBS = -lm' \
  '' \
  'OBJS = src/main.o src/parse.o src/ops.o' \
  '' \
  'calc: $(OBJS)' \
  '	$(CC) $(CFLAGS) -o calc $(OBJS) $(LDLIBS)' \
  '' \
  'src/%.o: src/%.c include/calc.h' \
  '	$(CC) $(CFLAGS) -c $< -o $@' \
  '' \
  'clean:' \
  '	rm -f calc $(OBJS)' \
  '' \
  '.PHONY: clean' > Makefile
make
./calc pow 2 10
