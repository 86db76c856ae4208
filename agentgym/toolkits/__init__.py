"""Toolkits: tools that several plugins' envs share, bound to an episode's sandbox.

A **toolkit** is a :class:`~agentgym.core.tools.Toolset`: a class whose ``@tool`` methods
are the tools, built once per episode from that episode's resource (here a
:class:`~agentgym.core.sandbox.Sandbox`) and keyword options. The class alone describes
its tools, so an env can show their schemas before any sandbox exists. This package
depends on :mod:`agentgym.core` alone; plugins import it, never each other.

* :class:`BashTools` (``bash``): commands in the sandbox's persistent shell, with a time
  limit and long output cut in the middle (:mod:`agentgym.toolkits.bash`).
* :class:`TerminalTools` (``terminal``): an interactive terminal, bash on a pty: programs
  that read their input (``python3``, ``sqlite3``, ``less``), keys such as Ctrl-C, commands
  that go on running between calls (:mod:`agentgym.toolkits.terminal`).
* :class:`EditorTools` (``str_replace_editor``): view, create, ``str_replace``, ``insert``
  and ``undo_edit`` on files of the workspace (:mod:`agentgym.toolkits.editor`).
* :class:`Workspace`: the model the file tools share (paths kept inside the sandbox's
  workspace, "does not exist, did you mean", UTF-8 text through the sandbox, a command
  time limit within the turn's budget, long results cut with a marker), and
  :mod:`agentgym.toolkits.text`, the line helpers. A plugin's own file tools build on
  them, as the SWE plugin's ``search`` does (:mod:`agentgym.plugins.swe.search`).

Every toolkit takes the sandbox first, then keyword options: ``command_timeout_s`` (one
command's limit; None for the sandbox's default), ``max_output_chars`` (a result's size
before it is cut) and, for the editor, ``max_view_lines``. An option out of range raises
``ValueError`` naming it. A tool reports what the agent can fix (a bad path, an
``old_str`` that matches twice) by raising :class:`~agentgym.core.tools.ToolError`; only a
dead sandbox (:class:`~agentgym.core.sandbox.SandboxError`) escapes otherwise.

An env uses toolkits by naming them in :attr:`~agentgym.core.env.AgentEnv.toolsets` (a
class, or a ``functools.partial`` of one with options) and binding them to the episode's
sandbox in ``setup_episode``; its own ``@tool`` methods (``submit``) come after them::

    class ScriptEnv(AgentEnv):
        toolsets = (functools.partial(BashTools, command_timeout_s=30), EditorTools)

        async def setup_episode(self, task):
            self.box = await open_sandbox("local")
            self.episode.resources["sandbox"] = self.box  # for the reward
            self.bind_toolsets(self.box)

        async def teardown_episode(self):
            await self.box.close()

        @tool
        def submit(self) -> str:
            '''Submit your work. This ends the episode.'''
            raise Submitted(None)

Until ``bind_toolsets`` runs (during an overlapped setup, ``reset(options={"overlap_setup":
True})``), ``tools()`` gives the described tools, so ``reset``'s info carries their
schemas; the episode's toolsets are dropped when it ends.
"""

from agentgym.toolkits.bash import BashTools
from agentgym.toolkits.editor import EditorTools
from agentgym.toolkits.terminal import TerminalTools
from agentgym.toolkits.workspace import Target, Workspace

__all__ = ["BashTools", "EditorTools", "Target", "TerminalTools", "Workspace"]
