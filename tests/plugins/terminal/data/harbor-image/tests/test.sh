#!/bin/bash
# The sum of the counts is 49.
if [ "$(cat /app/total.txt 2>/dev/null | tr -d '[:space:]')" = 49 ]; then
  echo "PASS total is 49"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL total.txt: $(cat /app/total.txt 2>&1)"; echo 0 > /logs/verifier/reward.txt
fi
