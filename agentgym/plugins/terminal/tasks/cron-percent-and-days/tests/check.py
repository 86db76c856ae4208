"""Checks for cron-percent-and-days: commands as cron would run them, and schedule meaning."""
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
    "tar czf /app/backups/home-$(date +%F).tgz /app/home": "15 3 * * 0",
    "/app/bin/invoice.sh": "0 6 1,15 * *",
    "/app/bin/quarterly.sh": "30 7 1 1,4,7,10 *",
    "/app/bin/poll.sh >> /app/logs/poll-$(date +%Y%m%d).log 2>&1": "0,10,20,30,40,50 9-17 * * 1-5",
    "/app/bin/payroll.sh": "0 12 13 * 5",
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
        check(env.get("SHELL") == "/bin/bash", f"SHELL is /bin/bash ({env.get('SHELL')!r})")
        for entry in entries:
            check(not entry.has_unescaped_percent,
                  f"no unescaped % in {entry.raw_command!r} (cron would cut the command there)")
        commands = [" ".join(e.command.split()) for e in entries]
        want = {" ".join(c.split()): s for c, s in WANT.items()}
        check(sorted(commands) == sorted(want),
              f"cron runs exactly the five commands, once each ({commands})")
        for entry in entries:
            command = " ".join(entry.command.split())
            if command in want:
                ref = cronlib.Entry(want[command].split(), command)
                check(entry.signature() == ref.signature(),
                      f"{command[:40]}: '{' '.join(entry.fields)}' runs when asked")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
