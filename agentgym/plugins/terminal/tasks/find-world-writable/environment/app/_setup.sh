#!/usr/bin/env bash
# Builds /app/data: some files and folders are writable by everyone.
set -euo pipefail
cd /app
mkdir -p data/reports/draft data/logs data/scripts data/shared data/cache
put() { printf '%s\n' "$2" > "data/$1"; chmod "$3" "data/$1"; }
put reports/q1.csv 'quarter,total' 644
put reports/q2.csv 'quarter,total' 666
put reports/draft/notes.txt 'draft' 646
put logs/app.log 'started' 664
put logs/old.log 'old' 602
put logs/.hidden.log 'hidden' 666
put scripts/run.sh '#!/bin/sh' 777
put scripts/build.sh '#!/bin/sh' 755
put shared/readme 'shared area' 640
put shared/upload.bin 'bytes' 622
put cache/x.tmp 'tmp' 660
put 'with space.txt' 'spaces' 666
put 'group-only.txt' 'group' 670
chmod 777 data/reports/draft
chmod 1777 data/shared
chmod 755 data data/reports data/logs data/scripts data/cache
