#!/usr/bin/env bash
# Plausible mistake: the build is fixed, but `make clean` still leaves the object files.
set -euo pipefail
cd /app/calc
printf '%s\n' \
  'CC = gcc' \
  'CFLAGS = -Wall -O2 -Iinclude' \
  '' \
  'OBJS = src/main.o src/parse.o src/ops.o' \
  '' \
  'calc: $(OBJS)' \
  '	$(CC) $(CFLAGS) -o calc $(OBJS) -lm' \
  '' \
  'src/%.o: src/%.c include/calc.h' \
  '	$(CC) $(CFLAGS) -c $< -o $@' \
  '' \
  'clean:' \
  '	rm -f calc' \
  '' \
  '.PHONY: clean' > Makefile
make
