"""The ``harnesses`` plugin: agent programs agentgym can train unmodified.

* ``mini-swe-agent``: `mini-swe-agent <https://mini-swe-agent.com>`_ (PyPI
  ``mini-swe-agent``, pinned), its ``mini`` command with its own text-based action format
  (one ```` ```mswea_bash_command ```` block per turn; ``echo
  COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` ends the run) and its default agent, which never
  asks for confirmation. It talks to the model through litellm's OpenAI provider at the
  episode's base URL; cost tracking is off (the model is local) and litellm reads its
  model list from its own package rather than the network.

* ``openai-agents``: a host harness (:mod:`agentgym.plugins.harnesses.agents_sdk`): an
  OpenAI Agents SDK agent whose tools are the env's tools, run in agentgym's process
  (``pip install agentgym[agents]``); it plays any env, sandboxed or not.

Any env whose episodes run in a sandbox can be played with the first, any env at all with
the second (:mod:`agentgym.core.harness`).
"""

from __future__ import annotations

from agentgym.core.harness import Harness
from agentgym.core.hookspecs import hookimpl

#: The mini-swe-agent release the harness installs.
MINI_SWE_AGENT = "mini-swe-agent==2.4.6"

#: mini-swe-agent's ``mini`` on the task: its text-based config, the default
#: (non-interactive) agent, the episode's model through litellm's OpenAI provider.
MINI_SWE_AGENT_COMMAND = (
    '"$AGENTGYM_HARNESS/bin/mini" -c mini_textbased.yaml'
    ' -c agent.step_limit="$MSWEA_STEP_LIMIT"'
    ' -c model.model_kwargs.api_base="$OPENAI_BASE_URL"'
    ' -c model.model_kwargs.api_key="$OPENAI_API_KEY"'
    ' --model "openai/$AGENTGYM_MODEL" --model-class litellm_textbased'
    ' --agent-class default --yolo --exit-immediately --cost-limit 0'
    ' --output "$MSWEA_GLOBAL_CONFIG_DIR/last.traj.json" --task "$AGENTGYM_INSTRUCTION"'
)


def mini_swe_agent() -> Harness:
    """The ``mini-swe-agent`` harness (module docstring)."""
    return Harness(
        id="mini-swe-agent",
        command=MINI_SWE_AGENT_COMMAND,
        requirements=(MINI_SWE_AGENT,),
        time_limit_s=900.0,
        env={"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1",
             "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/mini-swe-agent", "MSWEA_STEP_LIMIT": "30",
             "PAGER": "cat"},
        description="mini-swe-agent's `mini` (PyPI mini-swe-agent, text-based actions) in the"
                    " task's sandbox.",
    )


# The harness builders' names differ from the package's modules: importing a submodule
# sets an attribute of that name on this package, which would replace the function.
def openai_agents() -> Harness:
    """The ``openai-agents`` host harness (module docstring)."""
    return Harness(
        id="openai-agents", run="agentgym.plugins.harnesses.agents_sdk:run_agent",
        requirements=("openai-agents>=0.24,<0.25",), time_limit_s=900.0,
        description="An OpenAI Agents SDK agent whose tools are the env's tools, in"
                    " agentgym's process (any env).")


@hookimpl
def agentgym_harnesses() -> list[Harness]:
    return [mini_swe_agent(), openai_agents()]
