#!/usr/bin/env bash
# Plausible mistake: day-of-month and day-of-week are always combined with AND
set -euo pipefail
cd /app
python3 - <<'PY'
import datetime, json, re
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
NAMES = [{}, {}, {}, {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)},
         {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}]
LIMITS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]

def field(text, i):
    low, high = LIMITS[i]
    val = lambda s: NAMES[i].get(s.lower(), None) if s.lower() in NAMES[i] else int(s)
    out = set()
    for item in text.split(","):
        base, _, step = item.partition("/")
        step = int(step) if step else 1
        if base == "*":
            a, b = low, high
        elif "-" in base:
            a, b = (val(x) for x in base.split("-"))
        else:
            a = val(base)
            b = high if "/" in item else a
        out.update(range(a, b + 1, step))
    if i == 4 and 7 in out:
        out = (out - {7}) | {0}
    return out

jobs = {}
for line in open("crontab"):
    line = line.strip()
    if not line or line.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", line):
        continue
    if line.startswith("@"):
        macro, command = line.split(None, 1)
        fields = MACROS[macro].split()
    else:
        parts = line.split(None, 5)
        fields, command = parts[:5], parts[5]
    mins, hours, doms, months, dows = (field(f, i) for i, f in enumerate(fields))
    either = False  # treats the two day fields as AND, always

    def day_ok(d):
        if d.month not in months:
            return False
        a, b = d.day in doms, d.isoweekday() % 7 in dows
        return (a or b) if either else (a and b)

    runs = []
    day = datetime.date(2024, 2, 27)
    start = datetime.datetime(2024, 2, 27, 23, 50)
    while len(runs) < 5:
        if day_ok(day):
            for h in sorted(hours):
                for m in sorted(mins):
                    t = datetime.datetime.combine(day, datetime.time(h, m))
                    if t > start and len(runs) < 5:
                        runs.append(t.strftime("%Y-%m-%d %H:%M"))
        day += datetime.timedelta(days=1)
    jobs[command.strip()] = runs
json.dump(jobs, open("next_runs.json", "w"), indent=2)
PY

