#!/usr/bin/env bash
# Grader: reward 1 only when every check in check.py passes. The checks may run the agent's
# code; every process started meanwhile is stopped before the reward is written, into a
# folder made anew, so none of it can write the reward.
before=" $(cd /proc && for p in [0-9]*; do read -r -d '' s 2>/dev/null < $p/stat; \
  [[ $s ]] && s=(${s##*) }) && echo -n "$p:${s[19]} "; done) "
cd /app 2>/dev/null || true
python3 /tests/check.py
status=$?
# Frozen first, all at once (SIGSTOP to every process this user may signal, three
# times: a child forked while one went round is caught by the next), so that none
# forks anew faster than the loop below reads pids; the rest go on at the end.
for round in 1 2 3; do kill -STOP -1 2>/dev/null || :; done
for ((round = 0; round < 20; round++)); do
  left=
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p == "$$" ]] && continue
    stat=; read -r -d '' stat 2>/dev/null < "/proc/$p/stat"
    [[ $stat ]] || continue
    fields=(${stat##*) })
    [[ $before == *" $p:${fields[19]} "* ]] && continue
    for thread in /proc/$p/task/*/status; do
      state=
      while read -r key value _; do
        [[ $key == State: ]] && { state=$value; break; }
      done 2>/dev/null < "$thread"
      [[ -z $state || $state == Z ]] || { left+=" $p"; break; }
    done
  done
  [[ -z $left ]] && break
  kill -STOP $left 2>/dev/null; kill -KILL $left 2>/dev/null
done
kill -CONT -1 2>/dev/null || :
chmod -R u+rwX /logs 2>/dev/null; rm -rf /logs/verifier; mkdir -p /logs/verifier
if [ $status -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
