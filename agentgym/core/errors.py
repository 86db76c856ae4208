"""The exceptions agentgym raises to users.

Every message names the bad value, says why it is wrong and gives the fix, so that the
text of the exception is enough to act on.

Every exception class agentgym defines pickles (Ray ships exceptions between processes)
with its type, message and attributes intact, however its ``__init__`` is written: each
derives from :class:`PicklableException`, which pickles the finished exception's state
instead of calling ``__init__`` again. ``tests/core/test_errors.py`` checks every class.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def _restore(cls: type[BaseException], args: tuple, state: dict[str, Any]) -> BaseException:
    error = cls.__new__(cls)  # no __init__: args and state are what it computed
    error.args = args
    error.__dict__.update(state)
    return error


class PicklableException(BaseException):
    """Pickles (and copies) an exception as its ``args`` plus its attributes.

    The default pickling calls ``type(e)(*e.args)``, which breaks for an ``__init__`` whose
    parameters are not the message (``UnknownIdError(kind, value, known, command)``).
    Subclass this before the builtin base: ``class MyError(PicklableException, ValueError)``.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore, (type(self), self.args, dict(self.__dict__))


class AgentGymError(PicklableException, Exception):
    """Base class of every error agentgym raises on purpose."""


#: An unknown id's error lists the known ids when there are at most this many.
SHOWN_IDS = 12


class UnknownIdError(AgentGymError, KeyError):
    """An id (env, policy, parser, ...) that no loaded plugin provides; ``note`` is
    appended to the message (e.g. which plugins were not loaded)."""

    def __init__(self, kind: str, value: str, known: Iterable[str], list_command: str,
                 note: str = ""):
        self.kind, self.value, self.known = kind, value, sorted(known)
        close = difflib.get_close_matches(value, self.known, n=3, cutoff=0.5) or [
            k for k in self.known if value and value.casefold() in k.casefold()][:3]
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        # A few are worth listing; a long list (130 MiniWoB envs) buries the suggestion.
        shown = (f"known: {', '.join(self.known) or 'none'}" if len(self.known) <= SHOWN_IDS
                 else f"{len(self.known)} known")
        message = (f"Unknown {kind} {value!r}.{hint} Run `{list_command}` to see them all"
                   f" ({shown}).{note}")
        super().__init__(message)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class DuplicateIdError(AgentGymError):
    """Two plugins contributed the same id for the same kind of component."""

    def __init__(self, kind: str, value: str, first: str, second: str, fix: str = ""):
        self.kind, self.value, self.plugins = kind, value, (first, second)
        fix = fix or (f"Uninstall one of them, or skip one with"
                      f" AGENTGYM_DISABLE_PLUGINS={second}")
        super().__init__(
            f"The {kind} id {value!r} is registered by two plugins: {first!r} and {second!r}."
            f" {fix}."
        )


class MissingResourceError(AgentGymError):
    """Data, an image or a program an env needs cannot be reached.

    ``what`` says what is missing; ``fix`` says how to supply it.
    """

    def __init__(self, what: str, fix: str):
        self.what, self.fix = what, fix
        super().__init__(f"{what}. {fix}")


class MissingFileError(MissingResourceError, FileNotFoundError):
    """A file or folder the user named does not exist (``what``: which; ``fix``: how to
    name one that does)."""


class FactoryImportError(AgentGymError, ImportError):
    """A ``"module:attribute"`` string (a plugin's factory) names nothing importable: the
    message says which part is missing and the closest names there are."""


class InvalidArgumentError(AgentGymError, ValueError):
    """An argument whose value cannot be used (out of range, not one of the choices, a file
    that cannot be read); the message names the argument, its value and what it accepts."""


class DefinitionError(AgentGymError, TypeError):
    """A plugin's class does not meet its contract (an env whose reward is not a
    :class:`~agentgym.core.Reward`); the message names the class and the fix. The CLI
    shows it as an error line, not a traceback."""


class EnvStateError(AgentGymError, RuntimeError):
    """An env method was called in a state that does not allow it (step before reset)."""
