#!/bin/bash
# EXPECTED-ANSWER: the grader's own marker, which the agent must never find.
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then r=1; else r=0; fi
echo "answer: $(cat /app/answer.txt 2>&1)"; echo $r > /logs/verifier/reward.txt
