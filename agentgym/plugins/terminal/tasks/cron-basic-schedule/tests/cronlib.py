"""A small crontab reader with Vixie-cron semantics (used by the graders; standard library only).

Supports: comments, blank lines, NAME=value lines, five-field schedules with *, lists,
ranges, steps, month and weekday names, weekday 7 = Sunday, the @yearly/@annually/@monthly/
@weekly/@daily/@midnight/@hourly macros, and cron's day rule: when both day-of-month and
day-of-week are restricted (neither starts with '*'), a day matches if EITHER matches.
"""
import datetime
import re

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@hourly": "0 * * * *"}
MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
LIMITS = [(0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, MONTHS), (0, 7, DAYS)]
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*=")


class CronError(ValueError):
    pass


def _value(text, names, low, high):
    text = text.lower()
    if text in names:
        return names[text]
    if not text.isdigit():
        raise CronError(f"bad value {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"value {value} out of range {low}-{high}")
    return value


def parse_field(text, index):
    low, high, names = LIMITS[index]
    values = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"empty item in {text!r}")
        base, _, step = item.partition("/")
        if step:
            if not step.isdigit() or int(step) == 0:
                raise CronError(f"bad step in {item!r}")
            step = int(step)
        else:
            step = 1
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = _value(a, names, low, high), _value(b, names, low, high)
            if start > end:
                raise CronError(f"backwards range {base!r}")
        else:
            start = _value(base, names, low, high)
            end = high if item.count("/") else start
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:
        values.discard(7)
        values.add(0)
    return values


class Entry:
    def __init__(self, fields, command):
        if len(fields) != 5:
            raise CronError("a schedule needs five fields")
        self.fields = fields
        self.minutes, self.hours, self.doms, self.months, self.dows = (
            parse_field(f, i) for i, f in enumerate(fields))
        self.dom_star = fields[2].startswith("*")
        self.dow_star = fields[4].startswith("*")
        self.raw_command = command
        # cron: an unescaped % ends the command (the rest is standard input); \% is a %
        parts = re.split(r"(?<!\\)%", command, maxsplit=1)
        self.has_unescaped_percent = len(parts) > 1
        self.command = parts[0].replace("\\%", "%").strip()

    def day_matches(self, day):
        if day.month not in self.months:
            return False
        dom = day.day in self.doms
        dow = (day.isoweekday() % 7) in self.dows
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def signature(self, first=datetime.date(2024, 1, 1), days=731):
        """What the schedule means: its minutes, hours, and the days it runs on in a window."""
        run_days = frozenset(d for d in (first + datetime.timedelta(n) for n in range(days))
                             if self.day_matches(d))
        return frozenset(self.minutes), frozenset(self.hours), run_days

    def next_runs(self, after, count):
        out = []
        t = after.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
        limit = after + datetime.timedelta(days=366 * 8)
        while len(out) < count and t < limit:
            if not self.day_matches(t.date()):
                t = datetime.datetime.combine(t.date() + datetime.timedelta(1), datetime.time())
                continue
            if t.hour not in self.hours:
                t = t.replace(minute=0) + datetime.timedelta(hours=1)
                continue
            if t.minute in self.minutes:
                out.append(t)
            t += datetime.timedelta(minutes=1)
        return out


def parse_crontab(text):
    """Returns (env dict, list of Entry). Raises CronError on a line cron would reject."""
    env, entries = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if ENV.match(stripped):
            name, _, value = stripped.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[name.strip()] = value
            continue
        try:
            if stripped.startswith("@"):
                macro, _, command = stripped.partition(" ")
                if macro not in MACROS:
                    raise CronError(f"unknown macro {macro}")
                fields = MACROS[macro].split()
            else:
                parts = stripped.split(None, 5)
                if len(parts) < 6:
                    raise CronError("a schedule needs five fields and a command")
                fields, command = parts[:5], parts[5]
            if not command.strip():
                raise CronError("no command")
            entries.append(Entry(fields, command.strip()))
        except CronError as error:
            raise CronError(f"line {number}: {error}: {line!r}") from None
    return env, entries
