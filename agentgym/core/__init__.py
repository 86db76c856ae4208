"""The contracts every plugin shares: envs, tasks, tools, parsers, rewards, policies, registry.

Each contract is documented in its own module; this package re-exports the public names.
"""

from agentgym.core.env import AgentEnv, EnvProtocol
from agentgym.core.env_info import ExtraInfo, ResetInfo, ResetOptions, StepInfo
from agentgym.core.episode import Episode, Submitted
from agentgym.core.errors import (
    AgentGymError,
    DefinitionError,
    DuplicateIdError,
    EnvStateError,
    InvalidArgumentError,
    MissingFileError,
    MissingResourceError,
    UnknownIdError,
)
from agentgym.core.harbor import HarborTask, NotExportableError
from agentgym.core.hookspecs import hookimpl
from agentgym.core.parsers import ParsedTurn, ToolCall, ToolCallParser
from agentgym.core.policies import (
    Generation,
    NoopPolicy,
    OraclePolicy,
    PolicyContractError,
    Sampling,
    ScriptedPolicy,
    TextPolicy,
    TokenPolicy,
    WrongSolutionPolicy,
    build_policy,
    policy_level,
)
from agentgym.core.probes import ExploitProbe, ProbeTarget
from agentgym.core.registry import (
    EnvRegistration,
    Spec,
    build,
    get,
    make,
    open_sandbox,
    sandbox_backend,
)
from agentgym.core.reward import Reward, RewardResult, WeightedSum
from agentgym.core.sandbox import Sandbox, SandboxBackend, SandboxImage, SandboxLimits, SandboxSpec
from agentgym.core.task import GeneratedTasks, SolutionTurn, Task, TaskList, TaskSource, load_tasks
from agentgym.core.tools import Tool, ToolError, Toolset, submit, tool

__all__ = [
    "AgentEnv",
    "AgentGymError",
    "DefinitionError",
    "DuplicateIdError",
    "EnvProtocol",
    "EnvRegistration",
    "EnvStateError",
    "Episode",
    "ExploitProbe",
    "ExtraInfo",
    "GeneratedTasks",
    "Generation",
    "HarborTask",
    "InvalidArgumentError",
    "MissingFileError",
    "MissingResourceError",
    "NoopPolicy",
    "NotExportableError",
    "OraclePolicy",
    "ParsedTurn",
    "PolicyContractError",
    "ProbeTarget",
    "ResetInfo",
    "ResetOptions",
    "Reward",
    "RewardResult",
    "Sampling",
    "Sandbox",
    "SandboxBackend",
    "SandboxImage",
    "SandboxLimits",
    "SandboxSpec",
    "ScriptedPolicy",
    "SolutionTurn",
    "Spec",
    "StepInfo",
    "Submitted",
    "Task",
    "TaskList",
    "TaskSource",
    "TextPolicy",
    "TokenPolicy",
    "Tool",
    "ToolCall",
    "ToolCallParser",
    "ToolError",
    "Toolset",
    "UnknownIdError",
    "WeightedSum",
    "WrongSolutionPolicy",
    "build",
    "build_policy",
    "get",
    "hookimpl",
    "load_tasks",
    "make",
    "open_sandbox",
    "policy_level",
    "sandbox_backend",
    "submit",
    "tool",
]
