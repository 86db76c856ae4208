"""Terminal tasks generated at run time from benchmarks that installed packages ship.

Each module here reads one benchmark's data from its installed package (never a copy in
this repository) and writes Harbor task folders: :mod:`.agentbench` (AgentBench OS, from
``inspect-evals``) and :mod:`.nl2bash` (NL2Bash / InterCode-ALFA, from ``icalfa``). Both
expose ``materialize(dest, split)``, which returns the folders written and the ids left
out, each with the reason.
"""


#: The first line of a test.sh (a ``str.format`` template, braces doubled): the processes
#: running when it starts, each as ``pid:start time`` (a pid alone could be a new process
#: that a fork loop brought round to a recorded number). ``/proc/PID/stat`` is read whole
#: and cut at its last ``) ``: a process's name may hold a newline or ``) `` itself.
PROCESSES_BEFORE = """\
before=" $(cd /proc && for p in [0-9]*; do read -r -d '' s 2>/dev/null < $p/stat; \\
  [[ $s ]] && s=(${{s##*) }}) && echo -n "$p:${{s[19]}} "; done) "
"""

#: Part of a test.sh (a ``str.format`` template, braces doubled): stop every process started
#: since the script began (not in :data:`PROCESSES_BEFORE`'s list). A process is left alone
#: only when every thread of it is a zombie, as its threads' ``status`` files say (where
#: the kernel escapes the name): one whose first thread exited while others run on shows
#: ``Z`` in ``/proc/PID/stat`` too, and a signal to its pid still ends them all.
STOP_LEFTOVERS = """\
# Every process started since this script began (the agent's code the grade ran, and what
# it left running) is stopped before the reward is written, into a folder made anew.
# Frozen first, all at once (SIGSTOP to every process this user may signal, three
# times: a child forked while one went round is caught by the next), so that none
# forks anew faster than the loop below reads pids; the rest go on at the end.
for round in 1 2 3; do kill -STOP -1 2>/dev/null || :; done
for ((round = 0; round < 20; round++)); do
  left=
  for p in /proc/[0-9]*; do
    p=${{p#/proc/}}
    [[ $p == "$$" ]] && continue
    stat=; read -r -d '' stat 2>/dev/null < "/proc/$p/stat"
    [[ $stat ]] || continue
    fields=(${{stat##*) }})
    [[ $before == *" $p:${{fields[19]}} "* ]] && continue
    for thread in /proc/$p/task/*/status; do
      state=
      while read -r key value _; do
        [[ $key == State: ]] && {{ state=$value; break; }}
      done 2>/dev/null < "$thread"
      [[ -z $state || $state == Z ]] || {{ left+=" $p"; break; }}
    done
  done
  [[ -z $left ]] && break
  kill -STOP $left 2>/dev/null; kill -KILL $left 2>/dev/null
done
kill -CONT -1 2>/dev/null || :
"""

#: The end of a converted task's test.sh (a ``str.format`` template, braces doubled): stop
#: every process started since the script began (:data:`STOP_LEFTOVERS`), then write the
#: reward into a verifier folder made anew; ``status`` is the grade's exit status.
STOP_THEN_REWARD = STOP_LEFTOVERS + """\
chmod -R u+rwX /logs 2>/dev/null; rm -rf /logs/verifier; mkdir -p /logs/verifier
if [ $status -eq 0 ]; then reward=1; else reward=0; fi
echo $reward > /logs/verifier/reward.txt
echo "reward: $reward"
"""
