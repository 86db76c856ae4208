"""agentgym trajectories as ATIF documents, and back.

ATIF (the Agent Trajectory Interchange Format, Harbor's RFC 0001, here v1.8) is the JSON
trajectory format Harbor writes and TRL, verl, SkyRL, rLLM and NeMo Gym read. One
:class:`~agentgym.rollout.trajectory.Trajectory` (one episode) is one ATIF document.

**Mapping** (:func:`to_atif`; :func:`from_atif` reads it back):

* the conversation: each system or user message is a ``system`` or ``user`` step; each
  assistant message is an ``agent`` step, its ``tool_calls`` ATIF tool calls (``id`` ->
  ``tool_call_id``, the JSON-text ``arguments`` -> an ``arguments`` object), its
  ``reasoning_content`` ATIF's; the tool messages that follow it are that step's
  ``observation`` (one result per message, ``source_call_id`` its ``tool_call_id``).
  A message ATIF cannot hold as it is (content that is not text, a role ATIF has no
  source for, a tool message no call precedes, a call whose arguments are not a JSON
  object) still gets a step, and the step keeps the exact messages in
  ``extra.agentgym.messages``;
* ``agent``: ``name`` ``agentgym`` and its version, ``model_name`` the policy,
  ``tool_definitions`` the tools' schemas (OpenAI format, as agentgym holds them);
* ``final_metrics``: ``total_steps``; token totals when a token-level policy played;
  ``extra``: ``reward``, ``reward_metrics`` (the grader's dict), ``turns``,
  ``tool_errors`` and ``timings`` (seconds per stage);
* ``extra.agentgym``: ``env``, ``task_id``, ``episode``, ``policy``, ``finish_reason``,
  ``error``, and when not empty ``windows``, ``context_replies_only`` and ``screenshots``
  (base64 PNG; other ATIF viewers do not show them);
* tokens (token-level policies): each agent step the model sampled gets ATIF
  ``metrics``: ``prompt_token_ids`` (the whole sequence the model saw before it),
  ``completion_token_ids``, ``logprobs``, their counts, and in ``extra.agentgym`` the
  weights' ``versions`` and ``env_ids_after`` (tokens the env wrote after the step that no
  later step's prompt shows). Moving context windows (``earlier_samples``) are steps whose
  prompt does not extend the one before. When the steps cannot give back the record's
  exact token fields (an agent program's calls, an episode that failed mid-turn), those
  fields are also kept whole in ``extra.agentgym.tokens``.

Nothing is lost: :func:`from_atif` of :func:`to_atif` gives the same record (the tests
check it on real episodes, token-level ones included). :func:`from_atif` also reads ATIF
documents other programs wrote (Harbor's ``agent/trajectory.json``): the steps become the
conversation, ``final_metrics.extra.reward`` (when present) the reward.

**On disk** (:class:`AtifWriter`, :func:`read_atif`): ATIF's own tools (Harbor) keep one
document per ``.json`` file, so a folder holds one ``.json`` per episode
(``000000-TASK-EPISODE.json``, numbered in the order written); a ``.jsonl`` path holds
one document per line instead (appended as each episode ends, as agentgym's own files).
Either resumes: the episodes already there are skipped.

Writing needs the ``atif`` package (``pip install -e '.[atif]'``): every document is
validated with its models before it is written. Reading needs nothing beyond agentgym.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym import __version__
from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.rollout.jsonl import JsonlAppender, complete_lines
from agentgym.rollout.trajectory import Trajectory

__all__ = ["NAMESPACE", "SCHEMA_VERSION", "AtifWriter", "default_export_path",
           "document_name", "export_atif", "from_atif", "holds_atif", "is_atif", "is_atif_file",
           "read_agentgym", "read_atif", "to_atif", "validate"]

#: The ATIF version written (the ``atif`` package's MAJOR.MINOR).
SCHEMA_VERSION = "ATIF-v1.8"
#: The key of agentgym's own fields in ATIF's ``extra`` objects.
NAMESPACE = "agentgym"
#: The record's token fields (``extra.agentgym.tokens`` holds them when steps cannot).
TOKEN_FIELDS = ("prompt_ids", "completion_ids", "logprobs", "loss_mask", "versions",
                "earlier_samples")
#: How far into a ``.json`` file :func:`is_atif_file` looks for the schema version.
SNIFF_BYTES = 64 * 1024
_SCHEMA = re.compile(rb'"schema_version"\s*:\s*"ATIF-')
_SOURCES = {"system": "system", "user": "user", "assistant": "agent"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


# ---- agentgym -> ATIF ---------------------------------------------------------------------

def to_atif(trajectory: Trajectory) -> dict[str, Any]:
    """The ATIF document of one episode, as plain JSON data (module docstring); not
    validated: :func:`validate` does that."""
    steps = _steps(trajectory.messages)
    tokens_exact = _add_token_metrics(steps, trajectory)
    own: dict[str, Any] = {"env": trajectory.env, "task_id": trajectory.task_id,
                           "episode": trajectory.episode, "policy": trajectory.policy,
                           "finish_reason": trajectory.finish_reason,
                           "error": trajectory.error}
    if trajectory.windows:
        own["windows"] = trajectory.windows
    if trajectory.context_replies_only:
        own["context_replies_only"] = True
    if trajectory.screenshots:
        own["screenshots"] = trajectory.screenshots
    if not tokens_exact:
        own["tokens"] = {name: getattr(trajectory, name) for name in TOKEN_FIELDS}
    final: dict[str, Any] = {"total_steps": len(steps), "extra": {
        "reward": trajectory.reward, "reward_metrics": trajectory.metrics,
        "turns": trajectory.turns, "tool_errors": trajectory.tool_errors,
        "timings": trajectory.timings}}
    counted = [s["metrics"] for s in steps if "metrics" in s]
    if counted:
        final["total_prompt_tokens"] = sum(m["prompt_tokens"] for m in counted)
        final["total_completion_tokens"] = sum(m["completion_tokens"] for m in counted)
    agent: dict[str, Any] = {"name": "agentgym", "version": __version__}
    if trajectory.policy:
        agent["model_name"] = trajectory.policy
    if trajectory.tools:
        agent["tool_definitions"] = trajectory.tools
    document = {"schema_version": SCHEMA_VERSION,
                "trajectory_id": f"{trajectory.env}:{trajectory.task_id}:{trajectory.episode}",
                "agent": agent, "steps": steps, "final_metrics": final,
                "extra": {NAMESPACE: own}}
    # Graders' metrics may hold values JSON has no type for: written as their str, as
    # agentgym's own files do.
    return json.loads(json.dumps(document, default=str))


def _steps(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """One step per message, but tool messages, which join the agent step before them."""
    groups: list[list[Any]] = []
    for message in messages:
        if (_role(message) == "tool" and groups and _role(groups[-1][0]) == "assistant"):
            groups[-1].append(message)
        else:
            groups.append([message])
    steps = []
    for number, group in enumerate(groups, 1):
        step = _step(number, group)
        if _messages(step) != group:  # kept exactly, whatever ATIF made of them
            step["extra"] = {NAMESPACE: {"messages": group}}
        steps.append(step)
    return steps


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _step(number: int, group: list[Any]) -> dict[str, Any]:
    head = group[0] if isinstance(group[0], dict) else {"content": str(group[0])}
    source = _SOURCES.get(head.get("role"), "system")
    step: dict[str, Any] = {"step_id": number, "source": source,
                            "message": _text(head.get("content"))}
    if source != "agent":
        return step
    calls = [_call(call, number, k) for k, call in enumerate(head.get("tool_calls") or [])]
    if calls:
        step["tool_calls"] = calls
    if isinstance(head.get("reasoning_content"), str):
        step["reasoning_content"] = head["reasoning_content"]
    ids = {call["tool_call_id"] for call in calls}
    results = []
    for message in group[1:]:
        result: dict[str, Any] = {"content": _text(message.get("content"))}
        if message.get("tool_call_id") in ids:  # ATIF refuses an id no call of the step has
            result["source_call_id"] = message["tool_call_id"]
        results.append(result)
    if results:
        step["observation"] = {"results": results}
    return step


def _call(call: Any, number: int, k: int) -> dict[str, Any]:
    """An OpenAI ``tool_calls`` entry as an ATIF tool call (a call ATIF cannot hold as it
    is gets what can be read of it; its step keeps the messages exactly)."""
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = None
    return {"tool_call_id": call["id"] if isinstance(call.get("id"), str)
            else f"call_{number}_{k}",
            "function_name": str(function.get("name") or ""),
            "arguments": arguments if isinstance(arguments, dict) else {}}


def _text(content: Any) -> str:
    """ATIF's ``message``: the text of OpenAI content (a string, None, or parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
    return "" if content is None else str(content)


@dataclass
class _Sample:
    """One token sequence of an episode, as the loop kept it (or as steps give it back)."""

    prompt: list[int]
    completion: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    versions: list[int] | None = None

    def segments(self) -> list[tuple[int, int]]:
        """The model's turns: the runs of mask 1, as (start, end) in the completion."""
        runs, start = [], None
        for i, m in enumerate([*self.mask, 0]):
            if m and start is None:
                start = i
            elif not m and start is not None:
                runs.append((start, i))
                start = None
        return runs


def _samples_of(trajectory: Trajectory) -> list[_Sample]:
    samples = []
    for sample in trajectory.earlier_samples:
        mask = list(sample["loss_mask"])
        cut = mask.index(1) if 1 in mask else len(mask)
        ids, logprobs, versions = (sample["token_ids"], sample.get("logprobs"),
                                   sample.get("versions"))
        samples.append(_Sample(ids[:cut], ids[cut:], mask[cut:],
                               None if logprobs is None else logprobs[cut:],
                               None if versions is None else versions[cut:]))
    if trajectory.completion_ids:
        samples.append(_Sample(trajectory.prompt_ids, trajectory.completion_ids,
                               trajectory.loss_mask, trajectory.logprobs or None,
                               trajectory.versions or None))
    return samples


def _add_token_metrics(steps: list[dict[str, Any]], trajectory: Trajectory) -> bool:
    """Give the agent steps the model sampled their ATIF token metrics; whether the steps
    give back the record's token fields exactly (:func:`_tokens`)."""
    samples = _samples_of(trajectory)
    # (sample, start, end, whether it is the sample's last run) per sampled turn.
    turns = [(sample, a, b, k == len(runs) - 1) for sample in samples
             for runs in [sample.segments()] for k, (a, b) in enumerate(runs)]
    agents = [step for step in steps if step["source"] == "agent"]
    # The loop appends one assistant message per turn, each turn one sampled run: the last
    # `turns` agent steps are those runs. An agent program's messages are its last call's
    # view of the conversation, so its calls cannot be placed on steps.
    if (turns and len(turns) == trajectory.turns <= len(agents)
            and "harness" not in trajectory.metrics):
        for (sample, a, b, last), step in zip(turns, agents[len(agents) - len(turns):],
                                              strict=True):
            prompt = sample.prompt + sample.completion[:a]
            metrics: dict[str, Any] = {
                "prompt_tokens": len(prompt), "completion_tokens": b - a,
                "prompt_token_ids": prompt, "completion_token_ids": sample.completion[a:b]}
            if sample.logprobs is not None:
                metrics["logprobs"] = sample.logprobs[a:b]
            own: dict[str, Any] = {}
            # -1 is what reading fills in: versions the policy did not say are left out.
            if sample.versions is not None and any(v != -1 for v in sample.versions[a:b]):
                own["versions"] = sample.versions[a:b]
            if last and b < len(sample.completion):
                own["env_ids_after"] = sample.completion[b:]
            if own:
                metrics["extra"] = {NAMESPACE: own}
            step["metrics"] = metrics
    return _tokens(steps) == {name: getattr(trajectory, name) for name in TOKEN_FIELDS}


# ---- ATIF -> agentgym ---------------------------------------------------------------------

def is_atif(data: Any) -> bool:
    """Whether ``data`` (parsed JSON) is an ATIF document: an object whose
    ``schema_version`` starts with ``ATIF-``."""
    return isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF-")


def from_atif(document: dict[str, Any], name: str = "") -> Trajectory:
    """The agentgym record of an ATIF document (module docstring): the exact record
    :func:`to_atif` started from, or for another program's document the conversation its
    steps hold. ``name`` is the task id of a document that names none (no
    ``trajectory_id`` or ``session_id``): its file's name, say. Raises
    InvalidArgumentError for data that is not an ATIF document."""
    if not is_atif(document):
        raise InvalidArgumentError(
            f"not an ATIF document{f' ({name})' if name else ''}: an ATIF trajectory is a"
            " JSON object whose schema_version starts with 'ATIF-'")
    try:
        return _trajectory(document, name)
    except (KeyError, TypeError, AttributeError, ValueError) as broken:
        raise InvalidArgumentError(
            f"the ATIF document{f' {name}' if name else ''} cannot be read"
            f" ({type(broken).__name__}: {broken}); check it with the atif package's"
            " models: atif.Trajectory.model_validate(document)") from None


def _trajectory(document: dict[str, Any], name: str) -> Trajectory:
    own = _own(document)
    agent = document.get("agent") or {}
    final = (document.get("final_metrics") or {}).get("extra") or {}
    steps = document.get("steps") or []
    tokens = own["tokens"] if "tokens" in own else _tokens(steps)
    record = Trajectory(
        env=str(own.get("env", agent.get("name") or "")),
        task_id=str(own["task_id"] if "task_id" in own else document.get("trajectory_id")
                    or document.get("session_id") or name),
        episode=int(own.get("episode") or 0),
        policy=str(own.get("policy", agent.get("model_name") or "")),
        reward=float(final.get("reward") or 0.0),
        finish_reason=str(own.get("finish_reason") or ""),
        turns=int(final.get("turns", sum(s.get("source") == "agent" for s in steps))),
        tool_errors=int(final.get("tool_errors") or 0),
        messages=[message for step in steps for message in _messages(step)],
        metrics=dict(final.get("reward_metrics") or {}), error=own.get("error"),
        tools=list(agent.get("tool_definitions") or []),
        screenshots=list(own.get("screenshots") or []), windows=list(own.get("windows") or []),
        context_replies_only=bool(own.get("context_replies_only")),
        **{key: list(tokens[key]) for key in TOKEN_FIELDS})
    if isinstance(final.get("timings"), dict):
        record.timings = dict(final["timings"])
    return record


def _own(data: dict[str, Any] | None) -> dict[str, Any]:
    """agentgym's fields of an ATIF object (its ``extra.agentgym``), or nothing."""
    own = ((data or {}).get("extra") or {}).get(NAMESPACE)
    return own if isinstance(own, dict) else {}


def _messages(step: dict[str, Any]) -> list[Any]:
    """The chat messages (OpenAI format) one step stands for."""
    own = _own(step)
    if "messages" in own:
        return list(own["messages"])
    role = "assistant" if step["source"] == "agent" else step["source"]
    message: dict[str, Any] = {"role": role, "content": _content(step.get("message"))}
    names = {}
    if step.get("tool_calls"):
        message["tool_calls"] = []
        for call in step["tool_calls"]:
            names[call["tool_call_id"]] = call["function_name"]
            message["tool_calls"].append({
                "id": call["tool_call_id"], "type": "function",
                "function": {"name": call["function_name"],
                             "arguments": json.dumps(call.get("arguments") or {})}})
    if step.get("reasoning_content") is not None:
        message["reasoning_content"] = step["reasoning_content"]
    messages = [message]
    for result in (step.get("observation") or {}).get("results") or []:
        tool: dict[str, Any] = {"role": "tool"}
        if result.get("source_call_id") is not None:
            tool["tool_call_id"] = result["source_call_id"]
            if result["source_call_id"] in names:
                tool["name"] = names[result["source_call_id"]]
        tool["content"] = _content(result.get("content"))
        messages.append(tool)
    return messages


def _content(value: Any) -> Any:
    """OpenAI content of an ATIF message: its text, or its parts (as ATIF writes them;
    text parts read as OpenAI's)."""
    if value is None:
        return ""
    return [dict(part) for part in value] if isinstance(value, list) else str(value)


def _tokens(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The record's token fields as the agent steps' ATIF metrics give them: a step whose
    prompt extends the sequence so far continues it (what lies between is the env's), any
    other starts a new sample."""
    samples: list[_Sample] = []
    logprobs_known = versions_known = True
    for step in steps:
        metrics = step.get("metrics") or {}
        completion = metrics.get("completion_token_ids")
        if step.get("source") != "agent" or completion is None:
            continue
        prompt = metrics.get("prompt_token_ids")
        current = samples[-1] if samples else None
        sequence = [] if current is None else current.prompt + current.completion
        if current is None or (prompt is not None and prompt[:len(sequence)] != sequence):
            current = _Sample(list(prompt or []), logprobs=[], versions=[])
            samples.append(current)
        elif prompt is not None:
            _extend(current, prompt[len(sequence):], model=False)
        own = _own(metrics)
        logprobs_known &= metrics.get("logprobs") is not None
        versions_known &= own.get("versions") is not None
        _extend(current, completion, model=True, logprobs=metrics.get("logprobs"),
                versions=own.get("versions"))
        _extend(current, own.get("env_ids_after") or [], model=False)
    fields: dict[str, Any] = {name: [] for name in TOKEN_FIELDS}
    if not samples:
        return fields
    *earlier, last = samples
    for sample in earlier:
        pad = len(sample.prompt)
        fields["earlier_samples"].append({
            "token_ids": sample.prompt + sample.completion,
            "loss_mask": [0] * pad + sample.mask,
            "logprobs": [0.0] * pad + sample.logprobs if logprobs_known else None,
            "versions": [-1] * pad + sample.versions})
    fields.update(prompt_ids=last.prompt, completion_ids=last.completion,
                  loss_mask=last.mask, logprobs=last.logprobs if logprobs_known else [],
                  versions=last.versions if versions_known else [])
    return fields


def _extend(sample: _Sample, ids: list[int], model: bool, logprobs: list[float] | None = None,
            versions: list[int] | None = None) -> None:
    """Append tokens as the loop does: the env's with mask 0, logprob 0.0, version -1."""
    assert sample.logprobs is not None and sample.versions is not None
    sample.completion += ids
    sample.mask += [int(model)] * len(ids)
    sample.logprobs += list(logprobs) if model and logprobs else [0.0] * len(ids)
    sample.versions += list(versions) if model and versions else [-1] * len(ids)


# ---- validation ---------------------------------------------------------------------------

def _atif_models() -> Any:
    try:
        import atif
    except ImportError as missing:
        raise MissingResourceError(
            f"writing ATIF trajectories needs the atif package, whose models validate each"
            f" document ({missing})",
            "install agentgym's extra from its source folder: pip install -e '.[atif]'"
        ) from None
    return atif


def validate(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` checked with the ``atif`` package's models, as they write it (unset
    fields left out). Raises MissingResourceError without the package and
    InvalidArgumentError (the first problem and where) for a document that is not valid."""
    models = _atif_models()
    try:
        return models.Trajectory.model_validate(document).to_json_dict()
    except ValueError as invalid:  # pydantic's ValidationError
        errors = getattr(invalid, "errors", lambda: [])()
        first = errors[0] if errors else {"loc": (), "msg": str(invalid)}
        where = ".".join(map(str, first["loc"])) or "the document"
        name = document.get("trajectory_id") if isinstance(document, dict) else None
        raise InvalidArgumentError(
            f"the document{f' {name!r}' if name else ''} is not valid ATIF"
            f" ({len(errors) or 1} problem(s); first, at {where}: {first['msg']})") from None


# ---- files --------------------------------------------------------------------------------

def is_atif_file(path: str | Path) -> bool:
    """Whether ``path`` is a ``.json`` file holding an ATIF document: its first 64 KiB
    name an ``ATIF-`` schema version (the atif models and Harbor write it first)."""
    path = Path(path)
    if path.suffix != ".json" or not path.is_file():
        return False
    with path.open("rb") as handle:
        return bool(_SCHEMA.search(handle.read(SNIFF_BYTES)))


def holds_atif(path: str | Path) -> bool:
    """Whether ``path`` holds ATIF documents: an ATIF ``.json`` file, or a JSONL file
    whose first line is one."""
    path = Path(path)
    if path.suffix == ".json":
        return is_atif_file(path)
    with path.open("rb") as handle:
        first = handle.readline(SNIFF_BYTES)
    return bool(_SCHEMA.search(first))


def document_name(path: str | Path) -> str:
    """What an ATIF file's path says of its episode (the ``name`` :func:`from_atif` takes):
    its name, but in Harbor's ``TRIAL/agent/trajectory.json`` the trial's folder's."""
    path = Path(path)
    if path.stem == "trajectory" and path.parent.name == "agent":
        return path.parent.parent.name
    return path.stem


def read_atif(path: str | Path) -> list[Trajectory]:
    """The episodes of ATIF documents at ``path``: a ``.json`` file (one document), a
    ``.jsonl`` file (one a line) or a folder of ``.json`` files (in name order)."""
    path = Path(path)
    if path.is_dir():
        return [t for file in _documents(path) for t in read_atif(file)]
    if path.suffix == ".jsonl":
        return [from_atif(_parsed(line, f"{path} line {number}"), path.stem)
                for number, line in enumerate(complete_lines(path), 1)]
    document = _parsed(path.read_text(encoding="utf-8"), str(path))
    return [from_atif(document, document_name(path))]


def _parsed(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as bad:
        raise InvalidArgumentError(f"{where} is not JSON ({bad}): an ATIF trajectory is a"
                                   " JSON document") from None


def _documents(folder: Path) -> list[Path]:
    """The ATIF ``.json`` files of a folder and its subfolders, in name order."""
    return sorted(p for p in folder.rglob("*.json") if is_atif_file(p))


def read_agentgym(path: str | Path) -> list[Trajectory]:
    """The records of an agentgym trajectory file (``agentgym eval --out``, ``agentgym
    rollout --out``), with an error that says which line is not one."""
    path = Path(path)
    fix = ("export reads the JSONL files `agentgym eval --out` and `agentgym rollout --out`"
           " write")
    try:
        lines = complete_lines(path)
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{str(path)!r} is not a trajectory file (not text);"
                                   f" {fix}") from None
    records = []
    for number, line in enumerate(lines, 1):
        where = f"{str(path)!r} line {number}"
        try:
            data = json.loads(line)
        except ValueError:
            raise InvalidArgumentError(f"{where} is not JSON, so {str(path)!r} is not a"
                                       f" trajectory file; {fix}") from None
        if is_atif(data):
            raise InvalidArgumentError(f"{str(path)!r} already holds ATIF trajectories:"
                                       f" nothing to export (`agentgym view {path}` shows"
                                       " them)")
        if not isinstance(data, dict) or "task_id" not in data:
            raise InvalidArgumentError(f"{where} is not an agentgym trajectory (no task_id);"
                                       f" {fix}")
        try:
            records.append(Trajectory.from_json(line))
        except (TypeError, ValueError) as bad:
            raise InvalidArgumentError(f"{where} is not an agentgym trajectory ({bad});"
                                       f" {fix}") from None
    return records


class AtifWriter:
    """Writes episodes as ATIF documents, each validated with the ``atif`` models first
    (module docstring: the mapping and the two forms on disk).

    Args:
        path: a folder (one ``.json`` document per episode, each written whole under a
            temporary name and renamed, so a reader never sees half of one) or a
            ``.jsonl`` file (one document per line, appended and flushed per episode).
        resume: keep what ``path`` holds and skip its (task_id, episode) pairs; without
            it (or ``overwrite``) a path that already holds documents is an error.
        overwrite: remove the documents ``path`` holds first (a folder's ATIF ``.json``
            files; nothing else in it).
    """

    def __init__(self, path: str | Path, resume: bool = False, overwrite: bool = False):
        _atif_models()  # said before any episode runs
        self.path = Path(path)
        self.lines = self.path.suffix == ".jsonl"
        if self.path.suffix == ".json":
            raise InvalidArgumentError(
                f"{str(self.path)!r}: a .json file holds one ATIF document, and a run has"
                " many; name a folder (one .json per episode) or a .jsonl file (one"
                " document per line)")
        if self.path.exists() and self.path.is_dir() == self.lines:
            kind = "a folder" if self.lines else "a file"
            raise InvalidArgumentError(
                f"{str(self.path)!r} is {kind}: ATIF goes to a .jsonl file or to a folder"
                " (any other name); choose another path")
        existing = self._existing()
        if existing and overwrite:
            for file in existing:
                file.unlink()
            existing = []
        if existing and not resume:
            raise FileExistsError(
                f"{str(self.path)!r} already holds ATIF trajectories; pass --resume to"
                " continue that run, or choose another --out")
        self.done: set[tuple[str, int]] = (
            {t.key for t in read_atif(self.path)} if existing else set())
        self._out = JsonlAppender(self.path) if self.lines else None
        if not self.lines:
            self.path.mkdir(parents=True, exist_ok=True)
        self._count = len(existing) if not self.lines else 0

    def _existing(self) -> list[Path]:
        if self.lines:
            return [self.path] if self.path.is_file() and self.path.stat().st_size else []
        return _documents(self.path) if self.path.is_dir() else []

    def write(self, trajectory: Trajectory) -> None:
        """Convert, validate and write one episode."""
        document = validate(to_atif(trajectory))
        if self._out is not None:
            self._out.append(json.dumps(document))
        else:
            self._write_file(trajectory, json.dumps(document, indent=2))
        self.done.add(trajectory.key)

    def _write_file(self, trajectory: Trajectory, text: str) -> None:
        slug = _UNSAFE.sub("_", trajectory.task_id)[:80] or "episode"
        while True:
            target = self.path / f"{self._count:06d}-{slug}-{trajectory.episode}.json"
            self._count += 1
            if not target.exists():  # a file someone else put there stays
                break
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_text(text + "\n", encoding="utf-8")
        os.replace(temporary, target)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()

    def __enter__(self) -> AtifWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def default_export_path(source: str | Path) -> Path:
    """Where ``agentgym export SOURCE`` writes without ``--out``: a folder beside SOURCE,
    named as it is with ``.atif`` (``runs/shop.jsonl`` -> ``runs/shop.atif``)."""
    source = Path(source)
    source = source if source.name else source.resolve()  # "." names no folder
    return source.with_name((source.stem if source.is_file() else source.name) + ".atif")


def export_atif(files: Iterable[str | Path], out: str | Path,
                root: str | Path | None = None) -> int:
    """Convert agentgym trajectory files to ATIF at ``out`` (a folder, or a ``.jsonl``
    file: :class:`AtifWriter`); how many episodes were written. With ``root`` (the run
    folder ``files`` were found in), a folder ``out`` keeps the files apart: each one's
    episodes go to the subfolder its path under ``root`` names (``a/b.jsonl`` ->
    ``OUT/a/b/``), and those that already hold ATIF are left out (a file named alone that
    does is an error). Every file is read, and every destination checked, before
    anything is written."""
    out = Path(out)
    sources = [Path(f) for f in files]
    done = [f for f in sources if holds_atif(f)]
    if done and root is None:
        raise InvalidArgumentError(f"{str(done[0])!r} already holds ATIF trajectories:"
                                   f" nothing to export (`agentgym view {done[0]}` shows"
                                   " them)")
    sources = [f for f in sources if f not in done]
    if not sources:
        raise InvalidArgumentError(f"no agentgym trajectory files (*.jsonl) in"
                                   f" {str(root)!r} to export")
    records = {source: read_agentgym(source) for source in sources}
    if out.suffix == ".jsonl" or root is None or len(sources) == 1:
        destinations = {source: out for source in sources}
    else:
        destinations = {source: out / source.relative_to(root).with_suffix("")
                        for source in sources}
    writers = {}
    try:
        for path in dict.fromkeys(destinations.values()):
            writers[path] = AtifWriter(path)
    except FileExistsError:
        for writer in writers.values():
            writer.close()
        raise InvalidArgumentError(f"{str(path)!r} already holds ATIF trajectories; remove"
                                   " them or choose another --out") from None
    try:
        for source, trajectories in records.items():
            for trajectory in trajectories:
                writers[destinations[source]].write(trajectory)
    finally:
        for writer in writers.values():
            writer.close()
    return sum(map(len, records.values()))
