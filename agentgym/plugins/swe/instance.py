"""SWE task instances: the SWE-bench schema, loading it, and reading the patches it holds.

An :class:`SWEInstance` is one row of a SWE-bench style dataset (SWE-bench, Lite, Verified,
SWE-Gym, or tasks made by ``agentgym swe synth``): the repository and commit to start
from, the issue text, the gold ``patch`` and the ``test_patch`` that adds the tests, and the
tests that decide success (``FAIL_TO_PASS`` must go from failing to passing,
``PASS_TO_PASS`` must keep passing). Test ids are in the runner's format (pytest node ids
such as ``tests/test_x.py::TestY::test_z[param]``; Django's ``test_z (module.Class)``).

Rows are read with :meth:`SWEInstance.from_dict`, which accepts ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` as lists or as JSON-encoded strings (how the Hugging Face datasets store
them). Fields outside the schema are **kept**, in :attr:`SWEInstance.extra` (datasets add
their own: Verified's ``difficulty``, SWE-bench Multimodal's ``image_assets``, ...), and
written back by :meth:`SWEInstance.to_dict`; a field that looks like a misspelt schema
field (``FAIL_TO_PAS``, ``test_command``) is an error that names it and the likely
intent, so a typo never silently drops a setting.

:func:`load_instances` reads a ``.jsonl``, ``.json`` (a list, or ``{"instances": [...]}``)
or ``.parquet`` file, a directory holding such files (a downloaded dataset snapshot), or a
Hugging Face dataset name through ``datasets.load_dataset`` (which works offline only
from its cache); errors name the file and the line or row.

Patch helpers: :func:`split_patch` cuts a unified diff into per-file pieces (hunk lengths
are followed, so a removed line reading ``--- x`` is never taken for a header);
:func:`patch_files` lists the files a diff touches; :func:`is_test_path` says whether a
path looks like a test file. :func:`image_name` is the official harness's docker image.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym.core.errors import AgentGymError, MissingFileError, MissingResourceError

#: Fields of the SWE-bench schema a row must have.
REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS")
#: Fields some SWE-bench style datasets add; kept in ``extra`` without a typo check.
#: ``agentgym swe synth`` records in each row ``validation`` (the grader's verdict,
#: :mod:`agentgym.plugins.swe.validation`), ``difficulty``, ``mutations`` (kind, file and
#: function of each), ``failure_types`` (error type -> failing tests) and
#: ``statement_writer`` (:mod:`agentgym.plugins.swe.synth`).
KNOWN_EXTRA_FIELDS = frozenset({
    "difficulty", "image_assets", "FAIL_TO_FAIL", "PASS_TO_FAIL", "__index_level_0__",
    "license", "license_name", "meta", "install_config", "requirements", "environment",
    "image_name", "docker_image", "language", "model_patch", "model_name_or_path",
    "validation", "mutations", "failure_types", "statement_writer",
})
#: File suffixes :func:`load_instances` reads.
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


class InvalidInstanceError(AgentGymError, ValueError):
    """A dataset row is not a valid SWE instance (the message says which row and field)."""


@dataclass(kw_only=True)
class SWEInstance:
    """One SWE task, in the SWE-bench instance schema plus agentgym's optional fields.

    Args:
        instance_id: unique id, ``<owner>__<repo>-<number>`` in SWE-bench.
        repo: ``owner/name`` of the GitHub repository (or the package, for swe-synth).
        base_commit: the commit the agent starts from.
        problem_statement: the issue text the agent is given.
        FAIL_TO_PASS: tests that fail at ``base_commit`` and must pass after the fix.
        PASS_TO_PASS: tests that pass at ``base_commit`` and must keep passing.
        patch: the gold fix (a unified diff of non-test files); never shown to the agent.
        test_patch: the diff that adds or updates the tests, applied before grading.
        hints_text: comments on the issue from before the fix (optional extra context).
        version: the repository version the harness's environment is keyed by.
        environment_setup_commit: the commit the harness's environment was installed from.
        created_at: when the fixing pull request was opened.
        package: swe-synth tasks: the PyPI package whose sdist the repository is built from.
        package_version: swe-synth tasks: that package's version.
        test_cmd: the command that runs the tests (test ids are appended, or fill
            ``{tests}`` / ``{files}``); None for the default of the repository.
        image: a docker image to run the task in, instead of :func:`image_name`'s.
        extra: the row's fields outside this schema, kept as they were.
    """

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = field(default_factory=list)
    patch: str = ""
    test_patch: str = ""
    hints_text: str = ""
    version: str = ""
    environment_setup_commit: str = ""
    created_at: str = ""
    package: str | None = None
    package_version: str | None = None
    test_cmd: str | None = None
    image: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"instance {self.instance_id!r}"
        if not isinstance(self.instance_id, str) or not self.instance_id:
            raise InvalidInstanceError(
                f"instance_id must be a non-empty string, got {self.instance_id!r}")
        for name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise InvalidInstanceError(
                    f"{where}: {name} must be a list of test ids (strings), got {value!r};"
                    " from_dict also accepts a JSON-encoded list")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("FAIL_TO_PASS", "PASS_TO_PASS", "extra"):
                continue
            if value is not None and not isinstance(value, str):
                raise InvalidInstanceError(
                    f"{where}: {f.name} must be a string, got {type(value).__name__}"
                    f" {value!r}")
        if (self.package is None) != (self.package_version is None):
            raise InvalidInstanceError(
                f"{where}: package ({self.package!r}) and package_version"
                f" ({self.package_version!r}) go together: set both for a swe-synth task,"
                " or neither")

    @property
    def tests(self) -> list[str]:
        """FAIL_TO_PASS then PASS_TO_PASS: every test that grading runs."""
        return [*self.FAIL_TO_PASS, *self.PASS_TO_PASS]

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str | None = None) -> SWEInstance:
        """Read one dataset row. ``where`` (e.g. ``"tasks.jsonl line 3"``) goes into errors.

        ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` may be lists or JSON-encoded lists. Unknown
        fields go to ``extra``, unless one looks like a misspelt schema field (an error).
        """
        if not isinstance(data, dict):
            here = where or "a row"
            raise InvalidInstanceError(
                f"{here}: a row must be a JSON object (dict), got {type(data).__name__}")
        here = where or f"instance {data.get('instance_id', '?')!r}"
        missing = [name for name in REQUIRED_FIELDS if data.get(name) is None]
        if missing:
            raise InvalidInstanceError(
                f"{here}: missing required field{'s' if len(missing) > 1 else ''}"
                f" {', '.join(repr(m) for m in missing)}. Every row needs"
                f" {', '.join(REQUIRED_FIELDS)}")
        schema = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: dict[str, Any] = {}
        # A row written by to_dict has its extras at the top level; a dict under "extra"
        # (a hand-written row) is accepted too.
        extra: dict[str, Any] = dict(data["extra"]) if isinstance(data.get("extra"), dict) else {}
        for key, value in data.items():
            if key == "extra" and isinstance(value, dict):
                continue
            if key in schema:
                values[key] = value
            elif key in KNOWN_EXTRA_FIELDS:
                extra[key] = value
            else:
                close = difflib.get_close_matches(key, sorted(schema), n=1, cutoff=0.8)
                if close:
                    raise InvalidInstanceError(
                        f"{here}: unknown field {key!r}; did you mean {close[0]!r}? Rename"
                        f" it (fields: {', '.join(sorted(schema))})")
                extra[key] = value
        for name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if isinstance(values.get(name), str):
                values[name] = _json_list(values[name], name, here)
            elif name in values and values[name] is not None:
                values[name] = list(values[name])  # tuples, numpy arrays from parquet
            elif name in values:
                del values[name]
        for name in ("patch", "test_patch", "hints_text", "version",
                     "environment_setup_commit", "created_at"):
            if values.get(name, "") is None:  # hub rows hold None for empty text
                values[name] = ""
        if values.get("version") is not None and not isinstance(values["version"], str):
            values["version"] = str(values["version"])  # some datasets store 3.0 as a float
        if values.get("created_at") is not None and not isinstance(values["created_at"], str):
            values["created_at"] = str(values["created_at"])  # parquet timestamps
        try:
            return cls(**values, extra=extra)
        except InvalidInstanceError as e:
            raise InvalidInstanceError(f"{here}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (lists as lists, ``extra`` fields at the top level) that
        :meth:`from_dict` reads back into an equal instance."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "extra"}
        data["FAIL_TO_PASS"], data["PASS_TO_PASS"] = list(self.FAIL_TO_PASS), list(
            self.PASS_TO_PASS)
        return {**self.extra, **data}


def _json_list(text: str, name: str, where: str) -> list[str]:
    try:
        value = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as e:
        raise InvalidInstanceError(
            f"{where}: {name} is a string but not a JSON list ({e.msg} at char {e.pos}):"
            f" {text[:80]!r}") from None
    if not isinstance(value, list):
        raise InvalidInstanceError(
            f"{where}: {name} must hold a JSON list of test ids, got {text[:80]!r}")
    return value


def load_instances(source: str | os.PathLike[str], *, split: str = "test",
                   env_id: str = "swe-verified") -> list[SWEInstance]:
    """Every instance of ``source``, in order.

    Args:
        source: a ``.jsonl``, ``.json`` (a list of rows, or ``{"instances": [...]}``) or
            ``.parquet`` file; a directory of such files (only those whose name starts with
            ``split`` when any do, as in a Hugging Face snapshot's ``data/test-*.parquet``);
            or a Hugging Face dataset name such as ``"princeton-nlp/SWE-bench_Verified"``.
        split: the dataset split to load (hub names and directories only).
        env_id: the env the instances are for, named in the fix of an error.

    Raises:
        MissingFileError: (a ``FileNotFoundError``) a path that looks like a file does not
            exist.
        InvalidInstanceError: a row is invalid, or two rows share an instance_id.
        MissingResourceError: the hub dataset is neither reachable nor cached (found at
            once when the Hub cannot be reached: no retries).
    """
    path = Path(source)
    if path.is_dir():
        rows = _load_dir(path, split)
    elif path.is_file():
        rows = _load_file(path)
    elif _is_hub_name(str(source)):
        rows = _load_hub(str(source), split, env_id)
    else:
        raise MissingFileError(
            f"SWE task source {str(source)!r} does not exist",
            "Pass an existing .jsonl, .json or .parquet file, a directory of them, or a"
            " Hugging Face dataset name such as 'princeton-nlp/SWE-bench_Verified'")
    instances: list[SWEInstance] = []
    first_seen: dict[str, str] = {}
    for where, row in rows:
        instance = SWEInstance.from_dict(row, where=where)
        if instance.instance_id in first_seen:
            raise InvalidInstanceError(
                f"{where}: instance_id {instance.instance_id!r} already appeared at"
                f" {first_seen[instance.instance_id]}; instance ids must be unique")
        first_seen[instance.instance_id] = where
        instances.append(instance)
    return instances


def _is_hub_name(text: str) -> bool:
    return re.fullmatch(r"\w[\w.-]*/[\w.-]+", text) is not None and not text.endswith(
        FILE_SUFFIXES)


def _load_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path} line {number}"
                try:
                    rows.append((where, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise InvalidInstanceError(
                        f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
        return rows
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InvalidInstanceError(
                f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if isinstance(data, dict) and isinstance(data.get("instances"), list):
            data = data["instances"]
        if not isinstance(data, list):
            raise InvalidInstanceError(
                f"{path}: a .json task file must hold a list of instances or"
                f" {{\"instances\": [...]}}, got a {type(data).__name__}"
                + (f" with keys {sorted(data)[:10]}" if isinstance(data, dict) else ""))
        return [(f"{path} item {i}", row) for i, row in enumerate(data)]
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return [(f"{path} row {i}", row) for i, row in enumerate(table.to_pylist())]
    raise InvalidInstanceError(
        f"{path}: unsupported file type {path.suffix!r}; SWE tasks are read from"
        f" {', '.join(FILE_SUFFIXES)} files")


def _load_dir(path: Path, split: str) -> list[tuple[str, dict[str, Any]]]:
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in FILE_SUFFIXES)
    of_split = [p for p in files if p.name.startswith(split)]
    files = of_split or files
    if not files:
        raise MissingFileError(
            f"directory {str(path)!r} holds no {', '.join(FILE_SUFFIXES)} files",
            "Pass a task file or a directory containing them")
    return [row for p in files for row in _load_file(p)]


#: Values of HF_HUB_OFFLINE / HF_DATASETS_OFFLINE that turn offline mode on.
_TRUE = ("1", "true", "yes", "on")
#: Seconds the Hub gets to accept a connection before it counts as unreachable.
HUB_CONNECT_TIMEOUT_S = 3.0


def _load_hub(name: str, split: str, env_id: str) -> list[tuple[str, dict[str, Any]]]:
    fix = (
        "Download it where the Hub is reachable, e.g. `python -c \"from datasets import"
        f" load_dataset; load_dataset('{name}', split='{split}').to_json('tasks.jsonl')\"`,"
        f" and point the env at the file: `agentgym eval {env_id} -e tasks=tasks.jsonl ...`"
        f" on the command line, gym.make(\"{env_id}\", tasks=\"tasks.jsonl\") in Python"
        " (a .jsonl, .json or .parquet file)"
    )
    try:
        import datasets
    except ImportError:
        raise MissingResourceError(
            f"Loading the Hugging Face dataset {name!r} needs the `datasets` package, which is"
            " not installed",
            "Install it with `pip install 'agentgym[swe]'`, or " + fix[0].lower() + fix[1:],
        ) from None
    offline = _hub_unreachable()
    if offline and not _offline_mode():
        # No connection: the Hub client would retry for half a minute, logging each try.
        # Read the Hub cache's download instead, or say at once that there is none.
        cached = _cached_snapshot(name)
        if cached is not None:
            return _load_dir(cached, split)
        raise MissingResourceError(
            f"The Hugging Face dataset {name!r} (split {split!r}) could not be loaded: it is"
            f" not a local file, the Hub cannot be reached ({offline}) and it is not in the"
            " Hub's cache (if `datasets` loaded it before, HF_HUB_OFFLINE=1 reads it from"
            " its own cache)", fix)
    try:
        dataset = datasets.load_dataset(name, split=split)  # offline mode: no retries
    except Exception as e:  # not cached, no such dataset or split: same remedy
        why = f"the Hub cannot be reached ({offline})" if offline else "the Hub did not answer"
        raise MissingResourceError(
            f"The Hugging Face dataset {name!r} (split {split!r}) could not be loaded: it is"
            f" not a local file, {why} and it is not in the local cache"
            f" ({type(e).__name__}: {e})",
            fix,
        ) from e
    return [(f"{name}[{split}] row {i}", dict(row)) for i, row in enumerate(dataset)]


def _offline_mode() -> str | None:
    """The variable that puts the Hugging Face clients in offline mode, if one does."""
    return next((variable for variable in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
                 if os.environ.get(variable, "").strip().lower() in _TRUE), None)


def _hub_unreachable() -> str | None:
    """Why the Hugging Face Hub cannot be reached, found at once and without retries
    (offline mode set, or no connection to its host); None when it may be reached (a proxy
    is configured: only the client can tell)."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    variable = _offline_mode()
    if variable:
        return f"{variable} is set"
    if urllib.request.getproxies().get("https"):
        return None
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=HUB_CONNECT_TIMEOUT_S).close()
    except OSError as e:
        return f"no connection to {host}:{port}: {e.strerror or e}"
    return None


def _cached_snapshot(name: str) -> Path | None:
    """The folder of the dataset's last download in the Hub cache, if there is one."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, repo_type="dataset", local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError), or an unreadable cache
        return None


def image_name(instance_id: str, *, arch: str = "x86_64", namespace: str = "swebench",
               tag: str = "latest") -> str:
    """The official SWE-bench harness image of an instance:
    ``swebench/sweb.eval.x86_64.django_1776_django-11099:latest`` for
    ``django__django-11099`` (lower-cased; ``__`` is written ``_1776_`` because docker
    names cannot hold a double underscore)."""
    return f"{namespace}/sweb.eval.{arch}.{instance_id.lower().replace('__', '_1776_')}:{tag}"


# --- patches -----------------------------------------------------------------------------


@dataclass
class FilePatch:
    """The part of a unified diff about one file.

    Attributes:
        old_path: the file before the change (None when the diff creates it).
        new_path: the file after the change (None when the diff deletes it).
        text: this part of the diff, header lines included, ready to be joined with others.
    """

    old_path: str | None
    new_path: str | None
    text: str

    @property
    def paths(self) -> list[str]:
        """The paths this part touches (both sides of a rename)."""
        return list(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def split_patch(patch: str) -> list[FilePatch]:
    """Cut a unified diff (``git diff`` or plain ``diff -u``) into per-file parts.

    Text before the first file (a commit message, ``git format-patch`` headers) is left out.
    Paths lose their first component (``a/``, ``b/``), as ``git apply`` does by default.
    """
    lines = _lines(patch)
    parts: list[FilePatch] = []
    current: list[str] = []
    paths: dict[str, str | None] = {}
    seen_markers = False  # this part already had its ---/+++ lines or a hunk

    def flush() -> None:
        if current:
            old, new = paths.get("old"), paths.get("new")
            if "git_old" in paths or "git_new" in paths:
                old = paths.get("old", paths.get("git_old"))
                new = paths.get("new", paths.get("git_new"))
            parts.append(FilePatch(old, new, "".join(current)))

    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\n")
        if body.startswith("diff --git "):
            flush()
            current, paths, seen_markers = [line], {}, False
            old, new = _git_header_paths(body[len("diff --git "):])
            paths["git_old"], paths["git_new"] = old, new
            i += 1
            continue
        if (body.startswith("--- ") and i + 1 < len(lines)
                and lines[i + 1].startswith("+++ ")):
            if not current or seen_markers:
                flush()
                current, paths = [], {}
            current += [line, lines[i + 1]]
            paths["old"] = _marker_path(body[4:])
            paths["new"] = _marker_path(lines[i + 1].rstrip("\n")[4:])
            seen_markers = True
            i += 2
            continue
        if not current:
            i += 1  # preamble
            continue
        match = _HUNK.match(body)
        if match:
            seen_markers = True
            old_left = int(match.group(1)) if match.group(1) is not None else 1
            new_left = int(match.group(2)) if match.group(2) is not None else 1
            current.append(line)
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0):
                hunk_line = lines[i]
                tag = hunk_line[:1]
                if tag not in (" ", "-", "+", "\\", "\n", "\r"):
                    break  # miscounted hunk (a hand-edited patch): a header ends it
                if tag == "-":
                    old_left -= 1
                elif tag == "+":
                    new_left -= 1
                elif tag != "\\":  # context (" " or an empty line some tools write)
                    old_left -= 1
                    new_left -= 1
                current.append(hunk_line)
                i += 1
            continue
        for key, prefix in (("old", "rename from "), ("new", "rename to "),
                            ("old", "copy from "), ("new", "copy to ")):
            if body.startswith(prefix):
                paths[key] = _unquote(body[len(prefix):])
        if body.startswith("new file mode"):
            paths["git_old"] = None
        elif body.startswith("deleted file mode"):
            paths["git_new"] = None
        current.append(line)
        i += 1
    flush()
    return parts


def patch_files(patch: str) -> list[str]:
    """The files a unified diff touches, in order of appearance, each once: created,
    deleted and modified files, and both names of a renamed or copied one."""
    return list(dict.fromkeys(p for part in split_patch(patch) for p in part.paths))


def _lines(text: str) -> list[str]:
    # Only "\n" ends a line: str.splitlines would also cut at "\r", "\x0c", ... inside
    # the content of a changed line.
    pieces = text.split("\n")
    lines = [p + "\n" for p in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def _strip_prefix(path: str) -> str:
    return path.split("/", 1)[1] if "/" in path else path


def _marker_path(value: str) -> str | None:
    """The path of a ``---`` / ``+++`` line (a timestamp after a tab dropped)."""
    value = value.split("\t", 1)[0] if not value.startswith('"') else value
    value = _unquote(value.rstrip())
    return None if value == "/dev/null" else _strip_prefix(value)


def _git_header_paths(rest: str) -> tuple[str | None, str | None]:
    """The two paths of ``diff --git a/X b/Y`` (either may be C-quoted). Unquoted names
    holding spaces are ambiguous; they are read as the same name on both sides, which is
    what git writes unless the file was renamed (then ``rename from/to`` lines follow)."""
    if rest.startswith('"'):
        end = _quoted_end(rest)
        old, tail = _unquote(rest[:end]), rest[end:].lstrip(" ")
        return _strip_prefix(old), _strip_prefix(_unquote(tail))
    if rest.endswith('"'):
        start = rest.rfind(' "')
        return _strip_prefix(rest[:start]), _strip_prefix(_unquote(rest[start + 1:]))
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and _strip_prefix(rest[:half]) == _strip_prefix(
            rest[half + 1:]):
        return _strip_prefix(rest[:half]), _strip_prefix(rest[half + 1:])
    if " b/" in rest:
        old, _, new = rest.partition(" b/")
        return _strip_prefix(old), new
    old, _, new = rest.partition(" ")
    return _strip_prefix(old), _strip_prefix(new)


def _quoted_end(text: str) -> int:
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(text: str) -> str:
    """Undo git's C-style quoting of a path (``"t\\303\\251st.py"`` -> ``tést.py``)."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    out = bytearray()
    body, i = text[1:-1], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out += char.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


_TEST_DIRS = frozenset({"test", "tests", "testing"})


def is_test_path(path: str) -> bool:
    """Whether ``path`` (relative to the repository root) looks like part of a test suite:
    anything under a ``tests/``, ``test/`` or ``testing/`` directory, ``conftest.py``,
    ``test_*.py``, ``*_test.py``, ``*_tests.py``, ``test.py``, ``tests.py`` and
    ``pytest.ini``.

    Deliberately narrower than SWE-bench's own split of a pull request into ``patch`` and
    ``test_patch`` (any path containing "test"), so no gold patch touches a path matched
    here."""
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name = parts[-1].lower()
    if any(part.lower() in _TEST_DIRS for part in parts[:-1]):
        return True
    if name in ("conftest.py", "pytest.ini", "test.py", "tests.py"):
        return True
    if name.endswith(".py"):
        stem = name[:-3]
        return stem.startswith("test_") or stem.endswith(("_test", "_tests"))
    return False


__all__ = [
    "FILE_SUFFIXES",
    "KNOWN_EXTRA_FIELDS",
    "REQUIRED_FIELDS",
    "FilePatch",
    "InvalidInstanceError",
    "SWEInstance",
    "image_name",
    "is_test_path",
    "load_instances",
    "patch_files",
    "split_patch",
]
