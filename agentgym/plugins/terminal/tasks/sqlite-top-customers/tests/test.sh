#!/usr/bin/env bash
# Grader: reward 1 only when every check in check.py passes.
mkdir -p /logs/verifier
cd /app 2>/dev/null || true
if python3 /tests/check.py; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
