"""The ``openai-agents`` host harness: an OpenAI Agents SDK agent whose tools are the env's.

The agent (``agents.Agent``) talks to the episode's base URL through the SDK's Chat
Completions model, with tracing off (nothing leaves the machine); each of the env's tools
is an ``agents.FunctionTool`` with the tool's own JSON schema whose call runs through the
env (:meth:`~agentgym.core.harness.HostSession.call_tool`). The run stops as soon as the
env ends the episode (the SDK's ``tool_use_behavior`` hook), or after :data:`MAX_TURNS`
model turns.
"""

from __future__ import annotations

from typing import Any

# Imported with the module, so that loading the harness without the SDK installed says
# what to install (Harness.load), before any episode starts.
from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    Runner,
    ToolsToFinalOutputResult,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from agentgym.core.harness import HostSession

#: Model turns the SDK's runner may take before it stops (the env's own limit usually
#: ends the episode first).
MAX_TURNS = 50
INSTRUCTIONS = "You are an agent. Use the tools to do the task; call them one at a time."


async def run_agent(session: HostSession) -> None:
    """Run an Agents SDK agent on ``session``'s task until the env ends the episode."""
    set_tracing_disabled(True)

    def function_tool(schema: dict[str, Any]) -> Any:
        function = schema["function"]

        async def invoke(context: Any, arguments: str) -> str:
            return await session.call_tool(function["name"], arguments)

        return FunctionTool(name=function["name"], description=function.get("description", ""),
                            params_json_schema=function.get("parameters") or {"type": "object"},
                            on_invoke_tool=invoke, strict_json_schema=False)

    def stop_when_over(context: Any, results: list[Any]) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=session.over,
                                        final_output="episode over" if session.over else None)

    client = AsyncOpenAI(base_url=session.base_url, api_key=session.api_key, max_retries=0)
    agent = Agent(name="agentgym", instructions=INSTRUCTIONS,
                  model=OpenAIChatCompletionsModel(model=session.model, openai_client=client),
                  tools=[function_tool(schema) for schema in session.tools],
                  tool_use_behavior=stop_when_over)
    try:
        await Runner.run(agent, session.instruction, max_turns=MAX_TURNS)
    finally:
        await client.close()
