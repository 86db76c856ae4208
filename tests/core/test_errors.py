"""Every exception class agentgym defines survives pickling (Ray ships them between
processes) with its type, message and attributes; lookup errors suggest the closest id."""

import importlib
import inspect
import pathlib
import pickle
import pkgutil

import pytest

import agentgym
from agentgym.core.errors import DuplicateIdError, PicklableException, UnknownIdError
from agentgym.rollout.trajectory import Trajectory
from agentgym.rollout.validate import CheckResult, ValidationReport

#: Every module of the package (``__main__`` runs the command line when imported).
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(agentgym.__path__, "agentgym.")
    if not m.name.endswith(".__main__")
)

#: Arguments for classes whose parameters need more than a string each.
ARGUMENTS = {
    "UnknownIdError": ("env", "calculater", ["calculator", "swe-lite"], "agentgym list envs"),
    "ConfigError": ([("env.kwargs.splt", "unknown; did you mean 'split'?")], "train.yaml"),
    "EnvKwargsError": ("calculator", [("splt", "takes no argument 'splt'")]),
    "Submitted": ("42", "Submitted: 42"),
    "InvalidOption": ("-e", "splt=test: the env 'calculator' takes no argument 'splt'"),
    "TaskValidityError": (ValidationReport("calculator", ["t1"], [
        CheckResult("t1", "oracle", False, 0.0, "submitted", "submitted=true")]),),
    "RolloutError": ([Trajectory(env="x", task_id="t1", episode=0, error="RuntimeError: x"),
                      Trajectory(env="x", task_id="t2", episode=1)],),
}


def exception_classes(module):
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and obj.__module__ == module.__name__
    ]


def representative(cls):
    """An instance of ``cls`` built from :data:`ARGUMENTS` or its signature."""
    if cls.__name__ in ARGUMENTS:
        return cls(*ARGUMENTS[cls.__name__])
    if cls.__init__ is BaseException.__init__:  # no own __init__: a message
        return cls(f"{cls.__name__}: a message naming 'x' and the fix")
    args, kwargs = [], {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or p.default is not p.empty or p.kind in (p.VAR_POSITIONAL,
                                                                     p.VAR_KEYWORD):
            continue
        value = f"<{name}>"
        if p.kind is p.KEYWORD_ONLY:
            kwargs[name] = value
        else:
            args.append(value)
    try:
        return cls(*args, **kwargs)
    except Exception as e:
        pytest.fail(f"cannot build {cls.__qualname__}{(*args,)} ({e}); add its arguments to"
                    " ARGUMENTS in tests/core/test_errors.py")


def test_modules_are_found():
    assert {"agentgym.core.errors", "agentgym.trainers.config", "agentgym.cli"} <= set(MODULES)


@pytest.mark.parametrize("module_name", MODULES)
def test_every_exception_class_pickles_whole(module_name):
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "agentgym":
            raise
        pytest.skip(f"{module_name} needs {e.name}, an optional dependency not installed here")
    for cls in exception_classes(module):
        error = representative(cls)
        copy = pickle.loads(pickle.dumps(error))
        where = f"{module_name}.{cls.__qualname__}"
        assert type(copy) is cls, where
        assert str(copy) == str(error), where
        assert copy.args == error.args, where
        assert vars(copy) == vars(error), where


class Clash(PicklableException, ValueError):
    def __init__(self, a, b):
        self.a, self.b = a, b
        super().__init__(f"{a} clashes with {b}")


def test_a_class_with_its_own_init_pickles_through_the_base():
    copy = pickle.loads(pickle.dumps(Clash(1, "two")))
    assert (copy.a, copy.b, str(copy)) == (1, "two", "1 clashes with two")
    assert isinstance(copy, ValueError)


def test_unknown_id_suggests_the_closest_and_keeps_its_fields_across_pickling():
    error = UnknownIdError("env", "calculater", {"calculator": 1, "swe-lite": 2},
                           "agentgym list envs")
    copy = pickle.loads(pickle.dumps(error))
    assert "Did you mean 'calculator'?" in str(copy) and "agentgym list envs" in str(copy)
    assert (copy.kind, copy.value, copy.known) == ("env", "calculater",
                                                   ["calculator", "swe-lite"])
    assert isinstance(copy, KeyError) and str(copy) == str(error)


def test_duplicate_id_names_both_plugins_and_the_fix():
    error = DuplicateIdError("env", "calculator", "calculator", "copycat")
    assert "'calculator' and 'copycat'" in str(error)
    assert "AGENTGYM_DISABLE_PLUGINS=copycat" in str(error)
    custom = DuplicateIdError("env", "x", "a", "b", fix="Rename it")
    assert str(custom).endswith("Rename it.")
    assert pickle.loads(pickle.dumps(custom)).plugins == ("a", "b")


def test_an_unknown_id_among_many_suggests_the_close_ones_and_lists_none():
    many = ["calculator", *(f"miniwob-task-{i}" for i in range(130))]
    message = str(UnknownIdError("env", "calculater", many, "agentgym list envs"))
    assert "Did you mean 'calculator'?" in message
    assert "(131 known)" in message and "miniwob-task-0" not in message
    # No spelling is close: ids holding the text are the suggestions.
    message = str(UnknownIdError("env", "task-12", many, "agentgym list envs"))
    assert "Did you mean 'miniwob-task-12'" in message
    few = str(UnknownIdError("env", "x", ["a", "b"], "agentgym list envs"))
    assert few.endswith("(known: a, b).")


def _bad_task_row():
    from agentgym.core.task import Task

    Task.from_dict({"prompt": "no id"})


def _policy_given_an_argument():
    from agentgym.core.policies import build_policy

    build_policy("oracle:extra")


def _zero_time_limit():
    from agentgym.core.sandbox import SandboxLimits

    SandboxLimits(timeout_s=0)


def _empty_task_file(tmp_path):
    from agentgym.core.task import load_tasks

    (tmp_path / "tasks.jsonl").write_text("")
    load_tasks(tmp_path / "tasks.jsonl")


@pytest.mark.parametrize("bad_input", [_bad_task_row, _policy_given_an_argument,
                                       _zero_time_limit, _empty_task_file])
def test_bad_user_input_raises_agentgyms_typed_errors(bad_input, tmp_path):
    """What a user types (a task file, --policy, limits) fails with an AgentGymError,
    which the command line prints without a traceback; still a ValueError."""
    from agentgym.core.errors import AgentGymError

    args = [tmp_path] if "tmp_path" in inspect.signature(bad_input).parameters else []
    with pytest.raises(AgentGymError) as error:
        bad_input(*args)
    assert isinstance(error.value, ValueError)


#: Modules whose bare ``ValueError`` marks a caller's programming error, not a user's input.
PROGRAMMING_ERRORS = {"agentgym/sandboxes/shell.py", "agentgym/rollout/jsonl.py"}


def test_user_facing_errors_are_typed():
    """Bad input a user can give raises an :class:`~agentgym.core.errors.AgentGymError`
    (``InvalidArgumentError`` is still a ``ValueError``), so one ``except`` catches them all."""
    root = pathlib.Path(agentgym.__file__).parent
    bare = [f"{path.relative_to(root.parent)}:{number}"
            for path in sorted(root.rglob("*.py"))
            if str(path.relative_to(root.parent)) not in PROGRAMMING_ERRORS
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if "raise ValueError(" in line]
    assert not bare, f"raise InvalidArgumentError (agentgym.core.errors) instead at: {bare}"
