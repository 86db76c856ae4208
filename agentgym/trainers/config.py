"""The schema of ``agentgym train CONFIG.yaml``, loaded and validated before any model loads.

A config is one YAML mapping (see ``docs/training.md`` for every field)::

    model: Qwen/Qwen2.5-0.5B-Instruct        # a folder, a hub id, or {tiny: {...}}
    output_dir: runs/calculator
    seed: 0
    env: {id: calculator, kwargs: {split: train}}
    eval: {kwargs: {split: test}, episodes: 50, temperature: 0.0}      # optional
    rollout: {mode: pipeline, concurrency: 8, max_tokens: 256, temperature: 1.0}
    report_to: none                          # none | wandb | tensorboard
    stages:
      - sft: {demonstrations: {policy: oracle, episodes: 200}, args: {num_train_epochs: 3}}
      - rft: {tasks: 64, attempts: 4, args: {...}}
      - grpo: {args: {max_steps: 50}, options: {dynamic_sampling: true}, lora: {r: 16}}

:func:`load_config` reads the file into a :class:`TrainConfig` or raises one
:class:`ConfigError` listing every problem found, each under the dotted path of its field
(``stages[1].grpo.args.learning_rat``) with the fix: the closest valid name, the expected
type, the allowed values. Numeric bounds are declared in each field's metadata
(:mod:`agentgym.core.settings`); the ``rollout`` section's keys, with their types, defaults
and bounds, are the fields of the rollout's own settings dataclasses
(:class:`RolloutSection`), so a field added there is a config key at once. Stage ``args``
are checked against the fields (names and types) of ``trl.SFTConfig`` /
``trl.GRPOConfig``, ``options`` against
:class:`agentgym.trainers.grpo.GRPOOptions`, ``lora`` against ``peft.LoraConfig``; the env
id against the plugin registry and its kwargs against the env's constructor (names and
types: the check ``-e KEY=VALUE`` gets, :mod:`agentgym.core.env_kwargs`). Checks that
depend on the machine (a GPU for ``bf16``, an installed ``wandb``) and TRL's own
cross-field rules run in :func:`agentgym.trainers.run.train`, still before any model loads.

Relative paths are relative to the working directory. YAML reads ``1e-5`` as text (it
needs a dot: ``1.0e-5``); numeric fields accept such text and convert it.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentgym.core.conversion import ConversionError, closest, convert_to_type, describe, show
from agentgym.core.errors import AgentGymError
from agentgym.core.policies import Sampling
from agentgym.core.settings import bound_problem
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.models import looks_like_hub_id
from agentgym.rollout.pipeline import PipelineConfig

__all__ = [
    "REPORT_TO",
    "STAGE_KINDS",
    "ConfigError",
    "Demonstrations",
    "EnvSection",
    "EvalSection",
    "GRPOStage",
    "RFTStage",
    "RolloutSection",
    "SFTStage",
    "TinyModel",
    "TrainConfig",
    "load_config",
    "parse_config",
    "rollout_keys",
]

REPORT_TO: tuple[str, ...] = ("none", "wandb", "tensorboard")


class ConfigError(AgentGymError, ValueError):
    """A config that cannot run; ``issues`` holds ``(dotted path, problem and fix)`` pairs."""

    def __init__(self, issues: list[tuple[str, str]], source: str = "the config"):
        self.issues, self.source = issues, source
        count = f"{len(issues)} problem{'s' if len(issues) != 1 else ''}"
        lines = "\n".join(f"  {path or '(top level)'}: {problem}" for path, problem in issues)
        super().__init__(f"{source}: {count}\n{lines}")


# ---- the schema -------------------------------------------------------------------------------


@dataclass
class TinyModel:
    """``model: {tiny: {...}}``: :func:`agentgym.rollout.tiny_model.build_tiny_model` into
    ``<output_dir>/base-model``."""

    hidden_size: int = field(default=64, metadata={"min": 16})
    num_layers: int = field(default=2, metadata={"min": 1})
    seed: int = 0
    #: Standard deviation of the initial weights; None: transformers' 0.02.
    init_std: float | None = field(default=None, metadata={"gt": 0, "max": 1})
    #: Envs whose episodes the tokenizer also trains on (the calculator's always are): name
    #: the env the model is for, so that its words are whole tokens.
    corpus_envs: list[str] = field(default_factory=list)
    #: Episodes of each corpus env that the tokenizer reads (its first tasks).
    corpus_episodes: int = field(default=256, metadata={"min": 1})
    #: BPE tokens, the 256 byte symbols included (before the chat template's own).
    vocab_size: int = field(default=1024, metadata={"min": 257, "max": 65536})
    #: Steps of synthetic pretraining in copying from the context (0: random weights): a
    #: tiny model's stand-in for the induction heads a pretrained LM brings.
    copy_steps: int = field(default=0, metadata={"min": 0})

    def check(self, path: str) -> list[tuple[str, str]]:
        if self.hidden_size % 16:
            return [(f"{path}.hidden_size",
                     f"must be a multiple of 16 (heads are 16 wide), got {self.hidden_size}")]
        return []


@dataclass
class EnvSection:
    """``env``: the registered env to train on and the kwargs it is made with."""

    id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: An agent program (``agentgym list harnesses``) that plays every GRPO and eval
    #: episode in the task's sandbox, the model being trained behind it, instead of
    #: agentgym's own loop (docs/own-agent.md). Demonstrations are still played by the loop.
    harness: str | None = None


@dataclass
class EvalSection:
    """``eval``: pass rate on held-out tasks of the base model and after every stage (the
    same tasks and settings each time, so each stage's contribution is a number)."""

    #: Merged over ``env.kwargs`` (e.g. ``{split: test}``).
    kwargs: dict[str, Any] = field(default_factory=dict)
    episodes: int = field(default=50, metadata={"min": 1})
    #: 0 is greedy decoding.
    temperature: float = field(default=0.0, metadata={"min": 0})


#: Fields of the rollout dataclasses that are not keys of the ``rollout`` section, and why.
NOT_ROLLOUT_KEYS: dict[str, str] = {
    "seed": "the run's top-level `seed` seeds the episodes",
    "sampling": "its fields are keys of the section",
    "raise_on_error": "a training run records an episode's failure and goes on",
}


@dataclass
class RolloutSection:
    """``rollout``: how episodes are played and scheduled in every stage and in eval.

    The section holds the rollout's own settings dataclasses, so their fields, defaults and
    bounds are written once, where they are used: its keys are the fields of
    :class:`~agentgym.core.policies.Sampling` (per turn),
    :class:`~agentgym.rollout.loop.RolloutConfig` (per episode) and
    :class:`~agentgym.rollout.pipeline.PipelineConfig` (scheduling), side by side in one
    mapping (``{mode: pipeline, concurrency: 8, max_tokens: 256}``), but for
    :data:`NOT_ROLLOUT_KEYS`. :func:`rollout_keys` lists them.
    """

    #: How each episode is played (its ``seed`` is the run's: see :meth:`rollout_config`).
    episodes: RolloutConfig = field(default_factory=RolloutConfig)
    #: How episodes are scheduled.
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)

    def rollout_config(self, seed: int = 0, temperature: float | None = None) -> RolloutConfig:
        """:attr:`episodes` seeded with ``seed`` (``temperature`` overrides the sampling's)."""
        sampling = self.episodes.sampling
        if temperature is not None:
            sampling = dataclasses.replace(sampling, temperature=temperature)
        return dataclasses.replace(self.episodes, sampling=sampling, seed=seed)

    def to_dict(self) -> dict[str, Any]:
        """The section as its keys (what the YAML file holds)."""
        return {key: getattr(self._owner(cls), key) for key, (cls, _) in rollout_keys().items()}

    def _owner(self, cls: type) -> Any:
        return {Sampling: self.episodes.sampling, RolloutConfig: self.episodes,
                PipelineConfig: self.pipeline}[cls]


#: The dataclasses whose fields the ``rollout`` section holds, in the docs' order.
ROLLOUT_PARTS: tuple[type, ...] = (PipelineConfig, Sampling, RolloutConfig)


def rollout_keys() -> dict[str, tuple[type, dataclasses.Field]]:
    """Each key of the ``rollout`` section: the dataclass it belongs to and its field."""
    keys: dict[str, tuple[type, dataclasses.Field]] = {}
    for cls in ROLLOUT_PARTS:
        for f in dataclasses.fields(cls):
            if f.name not in NOT_ROLLOUT_KEYS:
                if f.name in keys:  # a new field may not shadow another part's
                    raise TypeError(f"{cls.__name__}.{f.name} is also a field of"
                                    f" {keys[f.name][0].__name__}: rename one")
                keys[f.name] = (cls, f)
    return keys


@dataclass
class Demonstrations:
    """``sft.demonstrations``: episodes of a (text-level) policy to imitate, collected into
    the stage folder."""

    policy: str = "oracle"
    episodes: int = field(default=100, metadata={"min": 1})
    #: Merged over ``env.kwargs``.
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Keep episodes with at least this reward (and no error); null keeps every episode.
    threshold: float | None = 1.0

    def check(self, path: str) -> list[tuple[str, str]]:
        return _check_policy(self.policy, f"{path}.policy")


@dataclass
class _Stage:
    """What every stage kind has."""

    #: Evaluate on the held-out tasks (``eval``) after this stage; false skips it, to
    #: spend that time on training where an intermediate pass rate is not needed. The
    #: run's "after" is the last stage evaluated.
    eval: bool = field(default=True, kw_only=True)


@dataclass
class SFTStage(_Stage):
    """``{sft: {...}}``: supervised fine-tuning on the model tokens of trajectories, from a
    file (``trajectories``) or collected first (``demonstrations``); exactly one of them.

    ``demonstrations`` is one mapping or a list of them, a mixture: each is collected on its
    own and the kept episodes are trained on together (``[{policy: oracle, episodes: 300},
    {policy: wrong, episodes: 700, threshold: null}]`` gives a warm-up policy that takes the
    wrong path as often as its demonstrators did). Loaded, it is always a list.
    """

    kind: ClassVar[str] = "sft"
    trajectories: Path | None = None
    demonstrations: list[Demonstrations] | None = field(
        default=None, metadata={"load": "demonstrations"})
    #: ``trl.SFTConfig`` fields.
    args: dict[str, Any] = field(default_factory=dict, metadata={"trl": "SFTConfig"})

    def __post_init__(self) -> None:
        if isinstance(self.demonstrations, Demonstrations):
            self.demonstrations = [self.demonstrations]

    def check(self, path: str) -> list[tuple[str, str]]:
        if (self.trajectories is None) == (self.demonstrations is None):
            return [(path, "give exactly one of `trajectories: FILE.jsonl` or"
                           " `demonstrations: {policy: oracle, episodes: N}`")]
        if self.trajectories is not None and not self.trajectories.is_file():
            return [(f"{path}.trajectories",
                     f"file not found: {str(self.trajectories)!r}; collect one with `agentgym"
                     f" rollout ENV_ID --policy oracle -n 100 --out {self.trajectories}`, or use"
                     " `demonstrations: {policy: oracle, episodes: 100}`")]
        return []


@dataclass
class RFTStage(_Stage):
    """``{rft: {...}}``: rejection fine-tuning: ``attempts`` tries at each of ``tasks``
    tasks with the current model, SFT on the ones scoring at least ``threshold``."""

    kind: ClassVar[str] = "rft"
    tasks: int = field(metadata={"min": 1})
    attempts: int = field(default=4, metadata={"min": 1})
    #: The index of the first task attempted; null: right after the tasks the run's earlier
    #: stages took demonstrations from or attempted (:meth:`TrainConfig.rft_first_task`).
    first_task: int | None = field(default=None, metadata={"min": 0})
    threshold: float = 1.0
    #: Fine-tune the run's base model, not the current one, on everything the run's
    #: stages trained on so far (kept demonstrations, kept attempts) and this stage's kept
    #: attempts; the attempts are still the current model's. Expert iteration as ReST-EM
    #: runs it: each round refits from the start, so no round builds on another's drift.
    restart: bool = False
    #: ``trl.SFTConfig`` fields.
    args: dict[str, Any] = field(default_factory=dict, metadata={"trl": "SFTConfig"})


@dataclass
class GRPOStage(_Stage):
    """``{grpo: {...}}``: GRPO (DAPO defaults) on the env through the rollout pipeline."""

    kind: ClassVar[str] = "grpo"
    #: How many of the env's tasks, in order from ``first_task``, GRPO draws its groups
    #: from; null: every task from ``first_task`` on.
    tasks: int | None = field(default=None, metadata={"min": 1})
    #: The index of the first of them; null: 0 without ``tasks``, else right after the
    #: tasks the run's earlier stages used (:meth:`TrainConfig.first_task`).
    first_task: int | None = field(default=None, metadata={"min": 0})
    #: ``trl.GRPOConfig`` fields.
    args: dict[str, Any] = field(default_factory=dict, metadata={"trl": "GRPOConfig"})
    #: :class:`agentgym.trainers.grpo.GRPOOptions` fields.
    options: dict[str, Any] = field(default_factory=dict, metadata={"options": True})
    #: ``peft.LoraConfig`` fields; null trains every weight.
    lora: dict[str, Any] | None = field(default=None, metadata={"lora": True})


Stage = SFTStage | RFTStage | GRPOStage
STAGE_KINDS: dict[str, type] = {"sft": SFTStage, "rft": RFTStage, "grpo": GRPOStage}


@dataclass
class TrainConfig:
    """A whole ``agentgym train`` run: the model, the env, and the stages in order."""

    model: str | TinyModel = field(metadata={"load": "model"})
    output_dir: Path
    env: EnvSection = field(metadata={"load": "env"})
    stages: list[Stage] = field(metadata={"load": "stages"})
    seed: int = 0
    eval: EvalSection | None = None
    rollout: RolloutSection = field(default_factory=RolloutSection,
                                    metadata={"load": "rollout"})
    report_to: Literal["none", "wandb", "tensorboard"] = "none"

    def check(self, path: str) -> list[tuple[str, str]]:
        return _check_env_kwargs(self)

    def stage_dir(self, index: int) -> Path:
        """Where stage ``index`` writes: ``<output_dir>/<index:02d>-<kind>``."""
        return self.output_dir / f"{index:02d}-{self.stages[index].kind}"

    def first_task(self, index: int) -> int:
        """The first task the ``rft`` or ``grpo`` stage ``index`` draws from: its
        ``first_task``; else, for an ``rft`` stage or a ``grpo`` stage with ``tasks``, the
        one after every task the run's earlier stages were shown solved or used (an ``sft``
        stage's demonstrations, each policy of a mixture from the first task; an ``rft``
        stage's attempts; a ``grpo`` stage's ``tasks``), so that it learns from problems
        new to the model; else (``grpo`` over every task) 0."""
        stage = self.stages[index]
        if isinstance(stage, RFTStage | GRPOStage) and stage.first_task is not None:
            return stage.first_task
        if isinstance(stage, GRPOStage) and stage.tasks is None:
            return 0
        end = 0
        for i, earlier in enumerate(self.stages[:index]):
            if isinstance(earlier, SFTStage):
                end = max([end] + [demo.episodes for demo in earlier.demonstrations or ()])
            elif isinstance(earlier, RFTStage | GRPOStage) and earlier.tasks is not None:
                end = max(end, self.first_task(i) + earlier.tasks)
        return end

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what ``run.json`` records)."""
        data = _plain(self)
        data["stages"] = [{s.kind: _plain(s)} for s in self.stages]
        return data


def _plain(obj: Any) -> Any:
    if isinstance(obj, RolloutSection):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return str(obj) if isinstance(obj, Path) else obj


# ---- loading ---------------------------------------------------------------------------------


def load_config(path: str | Path, *, output_dir: str | Path | None = None,
                seed: int | None = None) -> TrainConfig:
    """Read and validate the YAML file ``path``; ``output_dir`` and ``seed`` override the
    file's.

    Raises :class:`ConfigError` naming every problem (and ``FileNotFoundError``)."""
    import yaml

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError([("", f"not valid YAML: {where}{problem}")], str(path)) from None
    return parse_config(data, source=str(path), output_dir=output_dir, seed=seed)


def parse_config(data: Any, *, source: str = "the config",
                 output_dir: str | Path | None = None, seed: int | None = None) -> TrainConfig:
    """Validate already-parsed data (a mapping) into a :class:`TrainConfig`; ``output_dir``
    and ``seed`` replace its own (the run's ``seed``: a tiny model's ``seed`` stays)."""
    if isinstance(data, Mapping) and output_dir is not None:
        data = {**data, "output_dir": str(output_dir)}
    if isinstance(data, Mapping) and seed is not None:
        data = {**data, "seed": seed}
    issues: list[tuple[str, str]] = []
    config = _load_dataclass(TrainConfig, data, "", issues)
    if issues or config is None:
        # In the order of the file's sections.
        order = {str(key): i for i, key in enumerate(data)} if isinstance(data, Mapping) else {}
        issues.sort(key=lambda issue: order.get(re.split(r"[.\[]", issue[0])[0], len(order)))
        raise ConfigError(issues or [("", "the config is empty")], source)
    return config


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _unknown(name: Any, names: list[str], owner: str) -> str:
    close = closest(str(name), names)
    if close:
        return f"unknown field of {owner}{close}"
    if len(names) > 12:
        return f"unknown field of {owner} (see its documented fields)"
    return f"unknown field of {owner} (fields: {', '.join(names)})"


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _load_dataclass(cls: type, data: Any, path: str, issues: list[tuple[str, str]]) -> Any:
    """Build ``cls`` from a mapping, appending problems to ``issues`` (None when any)."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    owner = f"`{path}`" if path else "the config"
    if not isinstance(data, Mapping):
        issues.append((path, f"expected a mapping with fields {', '.join(fields)};"
                             f" got {show(data)}"))
        return None
    before = len(issues)
    for key in data:
        if key not in fields:
            issues.append((_join(path, str(key)), _unknown(key, list(fields), owner)))
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for name, f in fields.items():
        where = _join(path, name)
        if name not in data:
            if _required(f):
                issues.append((where, f"missing (required): expected {describe(hints[name])}"))
            continue
        loader = _LOADERS.get(f.metadata.get("load", ""))
        if loader is not None:
            values[name] = loader(data[name], where, issues)
            continue
        try:
            value = _coerce(data[name], hints[name], where, issues)
        except ConversionError as e:
            issues.append((where, str(e)))
            continue
        issues += _check_bounds(value, f.metadata, where)
        if "trl" in f.metadata:
            value = _check_trl_args(value, f.metadata["trl"], where, issues)
        elif "options" in f.metadata:
            value = _check_options(value, where, issues)
        elif f.metadata.get("lora") and value is not None:
            value = _check_fields(value, _lora_class(), "peft.LoraConfig", where, issues)
        values[name] = value
    if len(issues) > before:
        return None
    obj = cls(**values)
    if hasattr(obj, "check"):
        issues += obj.check(path)
    return obj if len(issues) == before else None


def _coerce(value: Any, annotation: Any, path: str, issues: list[tuple[str, str]]) -> Any:
    """:func:`~agentgym.core.conversion.convert_to_type`, with the config's dataclasses loaded here
    (their problems go to ``issues``, under ``path``)."""
    return convert_to_type(value, annotation,
                  load_dataclass=lambda cls, data: _load_dataclass(cls, data, path, issues))


def _check_bounds(value: Any, metadata: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    """The field's declared bounds (:mod:`agentgym.core.settings`), under ``path``."""
    problem = bound_problem(value, metadata)
    return [] if problem is None else [(path, problem)]


def _check_fields(values: dict[str, Any], cls: type, owner: str, path: str,
                  issues: list[tuple[str, str]], *, choices: bool = False) -> dict[str, Any]:
    """Check a free mapping against the init fields of dataclass ``cls``: names (with the
    closest one), types, and ``metadata["choices"]`` where ``choices``."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    checked = {}
    for key, value in values.items():
        where = _join(path, str(key))
        if key not in fields:
            issues.append((where, _unknown(key, sorted(fields), owner)))
            continue
        try:
            value = _coerce(value, hints.get(key, Any), where, issues)
        except ConversionError as e:
            issues.append((where, str(e)))
            continue
        allowed = fields[key].metadata.get("choices") if choices else None
        if allowed and value is not None and value not in list(allowed):
            allowed = [str(a) for a in allowed]
            issues.append((where, f"{value!r} is not allowed{closest(str(value), allowed)}"
                                  f" (allowed: {', '.join(allowed)})"))
            continue
        checked[key] = value
    return checked


#: Stage ``args`` agentgym sets itself, and why.
_MANAGED_ARGS = {
    "output_dir": "each stage writes to <output_dir>/<NN>-<kind>; set the top-level output_dir",
}


def _check_trl_args(values: dict[str, Any], name: str, path: str,
                    issues: list[tuple[str, str]]) -> dict[str, Any]:
    try:
        import trl
    except ModuleNotFoundError:
        issues.append((path, "training needs trl and torch: pip install 'agentgym[train]'"))
        return values
    for key, why in _MANAGED_ARGS.items():
        if key in values:
            issues.append((_join(path, key), f"set by agentgym: {why}"))
    values = {k: v for k, v in values.items() if k not in _MANAGED_ARGS}
    return _check_fields(values, getattr(trl, name), f"trl.{name}", path, issues, choices=True)


def _options_class() -> type | None:
    """:class:`agentgym.trainers.grpo.GRPOOptions`, or None while that module is absent."""
    try:
        module = importlib.import_module("agentgym.trainers.grpo")
    except ModuleNotFoundError as e:
        if e.name == "agentgym.trainers.grpo":
            return None
        raise
    return module.GRPOOptions


def _check_options(values: dict[str, Any], path: str,
                   issues: list[tuple[str, str]]) -> dict[str, Any]:
    cls = _options_class()
    if cls is None:
        return values
    # The YAML key ``async`` is the field ``asynchronous`` (a Python keyword cannot be a
    # field); problems are reported under the key the config used.
    values = {("asynchronous" if k == "async" else k): v for k, v in values.items()}
    found: list[tuple[str, str]] = []
    checked = _check_fields(values, cls, "GRPOOptions", path, found)
    inner = _join(path, "asynchronous")
    issues += [(_join(path, "async") + where[len(inner):] if where.startswith(inner) else where,
                problem) for where, problem in found]
    return checked


def _lora_class() -> type:
    import peft

    return peft.LoraConfig


def _load_model_field(value: Any, path: str, issues: list[tuple[str, str]]) -> Any:
    if isinstance(value, str) and value:
        if not looks_like_hub_id(value) and not Path(value).expanduser().is_dir():
            issues.append((path, f"folder not found: {value!r}; give a model folder"
                                 " (save_pretrained), a hub id such as"
                                 " Qwen/Qwen2.5-0.5B-Instruct, or {tiny: {}}"))
        return value
    if isinstance(value, Mapping) and list(value) == ["tiny"]:
        tiny = _load_dataclass(TinyModel, value["tiny"] or {}, f"{path}.tiny", issues)
        return tiny
    if isinstance(value, Mapping) and len(value) == 1:
        key = next(iter(value))
        issues.append((f"{path}.{key}", f"unknown model kind{closest(str(key), ['tiny'])};"
                                        " the only mapping form is {tiny: {hidden_size,"
                                        " num_layers, seed}}"))
        return None
    issues.append((path, "expected a model folder, a hub id (e.g. Qwen/Qwen2.5-0.5B-Instruct)"
                         f" or {{tiny: {{hidden_size: 64, num_layers: 2}}}}; got {show(value)}"))
    return None


def _load_stages(value: Any, path: str, issues: list[tuple[str, str]]) -> list[Any]:
    kinds = list(STAGE_KINDS)
    example = "e.g. `- grpo: {args: {max_steps: 10}}`"
    if not isinstance(value, list) or not value:
        issues.append((path, f"expected a non-empty list of stages ({', '.join(kinds)}),"
                             f" {example}; got {show(value)}"))
        return []
    stages = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(item, Mapping) or len(item) != 1:
            shown = list(item) if isinstance(item, Mapping) else show(item)
            issues.append((where, f"a stage is a mapping with one key, its kind"
                                  f" ({', '.join(kinds)}), {example}; got {shown}"))
            continue
        kind, body = next(iter(item.items()))
        if kind not in STAGE_KINDS:
            issues.append((where, f"unknown stage kind {kind!r}{closest(str(kind), kinds)}"
                                  f" (a stage is one of: {', '.join(kinds)})"))
            continue
        stage = _load_dataclass(STAGE_KINDS[kind], body if body is not None else {},
                                f"{where}.{kind}", issues)
        if stage is not None:
            stages.append(stage)
    return stages


def _load_demonstrations(value: Any, path: str,
                         issues: list[tuple[str, str]]) -> list[Demonstrations] | None:
    """One ``{policy, episodes, ...}`` mapping, or a non-empty list of them."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        one = _load_dataclass(Demonstrations, value, path, issues)
        return None if one is None else [one]
    if not isinstance(value, list) or not value:
        issues.append((path, "expected {policy: oracle, episodes: N} or a non-empty list of"
                             f" such mappings (a mixture of policies); got {show(value)}"))
        return None
    mixture = [_load_dataclass(Demonstrations, item, f"{path}[{i}]", issues)
               for i, item in enumerate(value)]
    return None if None in mixture else mixture


def _load_rollout(value: Any, path: str, issues: list[tuple[str, str]]) -> Any:
    """The ``rollout`` section: each key converted to its field's type and checked against
    its declared bounds, then the dataclasses built (their own checks then find nothing
    new, but a rule across fields)."""
    if not isinstance(value, Mapping):
        issues.append((path, f"expected a mapping of rollout settings, e.g. {{mode: pipeline,"
                             f" concurrency: 8}}; got {show(value)}"))
        return None
    keys = rollout_keys()
    before = len(issues)
    values: dict[type, dict[str, Any]] = {cls: {} for cls in ROLLOUT_PARTS}
    for key, item in value.items():
        where = _join(path, str(key))
        if key not in keys:
            why = NOT_ROLLOUT_KEYS.get(str(key))
            issues.append((where, f"not a rollout setting: {why}" if why
                           else _unknown(key, list(keys), f"`{path}`")))
            continue
        cls, f = keys[key]
        try:
            item = _coerce(item, typing.get_type_hints(cls)[key], where, issues)
        except ConversionError as e:
            issues.append((where, str(e)))
            continue
        issues += _check_bounds(item, f.metadata, where)
        values[cls][key] = item
    if len(issues) > before:
        return None
    try:
        sampling = Sampling(**values[Sampling])
        return RolloutSection(RolloutConfig(sampling=sampling, **values[RolloutConfig]),
                              PipelineConfig(**values[PipelineConfig]))
    except ValueError as e:
        issues.append((path, str(e)))
        return None


def _load_env(value: Any, path: str, issues: list[tuple[str, str]]) -> Any:
    """The env section; its id must name a registered env."""
    from agentgym.core.errors import UnknownIdError
    from agentgym.core.plugins import plugin_host

    before = len(issues)
    env = _coerce(value, EnvSection, path, issues) if isinstance(value, Mapping) else None
    if env is None:
        if len(issues) == before:
            issues.append((path, f"expected a mapping {{id: ENV_ID, kwargs: {{...}}}},"
                                 f" got {show(value)}"))
        return None
    try:
        plugin_host().get("envs", env.id)
    except UnknownIdError as e:
        issues.append((f"{path}.id", str(e)))
    return env


_LOADERS: dict[str, Callable[[Any, str, list[tuple[str, str]]], Any]] = {
    "model": _load_model_field,
    "env": _load_env,
    "stages": _load_stages,
    "demonstrations": _load_demonstrations,
    "rollout": _load_rollout,
}


# ---- checks against the plugins -----------------------------------------------------------


def _check_env_kwargs(config: TrainConfig) -> list[tuple[str, str]]:
    """The env's kwargs (with eval's and demonstrations') are arguments its constructor
    takes, of its types (converted in place): the same check as ``-e KEY=VALUE`` on the
    command line (:mod:`agentgym.core.env_kwargs`)."""
    from agentgym.core.env_kwargs import env_signature

    try:
        signature = env_signature(config.env.id)
    except Exception as e:
        return [("env.id", f"the env {config.env.id!r} cannot be imported:"
                           f" {type(e).__name__}: {e}")]
    groups = [("env.kwargs", config.env.kwargs)]
    if config.eval is not None:
        groups.append(("eval.kwargs", config.eval.kwargs))
    for i, stage in enumerate(config.stages):
        if isinstance(stage, SFTStage) and stage.demonstrations is not None:
            mixture = stage.demonstrations
            for j, demo in enumerate(mixture):
                where = f"[{j}]" if len(mixture) > 1 else ""
                groups.append((f"stages[{i}].sft.demonstrations{where}.kwargs", demo.kwargs))
    issues = []
    for path, kwargs in groups:
        converted, problems = signature.convert(kwargs)
        kwargs.update(converted)
        issues += [(_join(path, str(key)), problem) for key, problem in problems]
    if config.env.harness is not None:
        from agentgym.core.registry import get

        try:
            get("harnesses", config.env.harness)
        except KeyError as e:
            issues.append(("env.harness", str(e).strip("'\"")))
    return issues


def _check_policy(name: str, path: str) -> list[tuple[str, str]]:
    """A policy name (``ID`` or ``ID:ARG``) whose id a loaded plugin registers."""
    from agentgym.core.errors import UnknownIdError
    from agentgym.core.policies import lookup_policy

    try:
        lookup_policy(name)
    except UnknownIdError as e:
        return [(path, str(e))]
    return []
