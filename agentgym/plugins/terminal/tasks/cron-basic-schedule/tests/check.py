"""Checks for cron-basic-schedule: parse /app/crontab and compare what each schedule means."""
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import cronlib

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


WANT = {
    "/app/bin/backup.sh": "30 2 * * *",
    "/app/bin/cleanup.sh": "0,15,30,45 * * * *",
    "/app/bin/report.sh --weekly": "0 9 * * 1,2,3,4,5",
    "/app/bin/rotate-logs.sh": "0 0 1 * *",
    "/app/bin/sync.sh": "5 0,2,4,6,8,10,12,14,16,18,20,22 * * *",
}
try:
    text = Path("/app/crontab").read_text()
except OSError as error:
    text = None
    print(f"cannot read /app/crontab: {error}")
if check(text is not None, "/app/crontab exists"):
    try:
        env, entries = cronlib.parse_crontab(text)
    except cronlib.CronError as error:
        env, entries = None, None
        print(f"cron would reject it: {error}")
    if check(entries is not None, "the crontab is valid"):
        check(env.get("MAILTO") == "ops@example.com",
              f"MAILTO is ops@example.com ({env.get('MAILTO')!r})")
        commands = [" ".join(e.command.split()) for e in entries]
        check(sorted(commands) == sorted(WANT), f"exactly the five jobs, once each ({commands})")
        for entry in entries:
            command = " ".join(entry.command.split())
            if command in WANT:
                want = cronlib.Entry(WANT[command].split(), command)
                check(entry.signature() == want.signature(),
                      f"{command}: '{' '.join(entry.fields)}' runs when asked")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
