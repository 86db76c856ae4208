"""Toolkits: tools that several plugins' envs share, bound to an episode's sandbox, and
the base of those envs (:class:`SandboxedEnv`).

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
class, or a ``functools.partial`` of one with options); its own ``@tool`` methods
(``submit``) come after them. :class:`SandboxedEnv` (:mod:`agentgym.toolkits.sandboxed`)
is the base of such an env: each episode's sandbox is opened from the task's spec, kept by
the episode (closed when the env ends it) and the toolsets are bound to it; a grader reads
the sandbox of the episode it grades (:func:`episode_sandbox`)::

    class ScriptEnv(SandboxedEnv):
        toolsets = (functools.partial(BashTools, command_timeout_s=30), EditorTools)

        async def grade(self, episode):
            ran = await episode_sandbox(episode).exec("python3 hello.py", timeout=30)
            return RewardResult(float(ran.output.strip() == "hello"))

        @tool
        def submit(self) -> str:
            '''Submit your work. This ends the episode.'''
            raise Submitted(None)

Until the toolsets are bound (during an overlapped setup, ``reset(options={"overlap_setup":
True})``), ``tools()`` gives the described tools, so ``reset``'s info carries their
schemas; the episode's toolsets go with it.
"""

from agentgym.toolkits.bash import BashTools
from agentgym.toolkits.editor import EditorTools
from agentgym.toolkits.sandboxed import SandboxedEnv, episode_sandbox
from agentgym.toolkits.terminal import TerminalTools
from agentgym.toolkits.workspace import Target, Workspace

__all__ = ["BashTools", "EditorTools", "SandboxedEnv", "Target", "TerminalTools", "Workspace",
           "episode_sandbox"]
