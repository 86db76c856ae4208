"""The hook the ``swe`` plugin adds (``agentgym_addhooks``), for any plugin to implement.

``agentgym_statement_writers`` is collected as the kind ``statement_writers``:
``agentgym list statement_writers`` lists them and ``agentgym swe synth --statement ID``
uses one. docs/hooks.md documents it beside core's hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgym.core.hookspecs import hookspec

if TYPE_CHECKING:
    from agentgym.core.contributions import Spec


@hookspec
def agentgym_statement_writers() -> list[Spec]:
    """Problem-statement writers for synthesized tasks (``agentgym swe synth --statement``).

    Returns:
        A list of :class:`~agentgym.core.contributions.Spec`. A writer named ``ID`` or
        ``ID:ARG`` is built by ``factory(ARG)`` (``ARG`` is ``None`` when absent) and returns
        an object with a ``name`` (recorded in each row's ``statement_writer``) and ``async
        write(evidence, rejected) -> str``; docs/hooks.md and
        :mod:`agentgym.plugins.swe.statements` say what evidence it gets and the leak checks
        its text must pass.
    """
