"""The reference env: evaluate an arithmetic expression with a tool, submit the result.

Tasks come from a seeded generator (``split`` ``"train"`` or ``"test"``, disjoint by
construction; ``operands`` sets how many numbers an expression has, 2 or 3 by default) or
from a task file (``tasks=path.jsonl``). Each task's reference solution
is two turns: call ``calculator`` with the task's expression, submit what it returned.
A very small model can learn it from demonstrations, since both arguments are copied:
the expression from the prompt, the answer from the tool's result. Its three known-wrong
solutions (the ``wrong``, ``wrong:2`` and ``wrong:3`` policies): two skip the tool, one
submitting the expression itself, unevaluated, the other a near miss (the answer plus
one); the third misreads the task, evaluating the expression without its last operand and
submitting that result. The grader must want the number, exactly.
"""

from __future__ import annotations

import ast
import hashlib
import math
import operator
import random
from collections.abc import Sequence
from typing import Any, Literal

from agentgym.core.env import AgentEnv
from agentgym.core.episode import Episode
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.parsers import ToolCall, ToolCallParser
from agentgym.core.reward import Reward, RewardResult
from agentgym.core.task import WRONG_SOLUTIONS, GeneratedTasks, SolutionTurn, Task, TaskSource
from agentgym.core.tools import ToolError, submit, tool

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_LIMIT = 1e15
#: Characters of an expression that are parsed (a longer one is refused before parsing,
#: which costs memory in proportion to its length).
MAX_EXPRESSION_CHARS = 1000


def evaluate_expression(expression: str) -> float | int:
    """Evaluate arithmetic safely (numbers, + - * / // % **, parentheses), in bounded time
    and memory whatever ``expression`` is; anything else raises :class:`ToolError`."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"the expression is {len(expression)} characters long; the limit is"
                        f" {MAX_EXPRESSION_CHARS}")

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
                raise ToolError("exponent or base too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        raise ToolError(f"unsupported syntax {ast.unparse(node)!r}: use numbers, + - * / ( )")

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ToolError(f"cannot parse {expression!r}: {e.msg}") from None
    except (RecursionError, MemoryError, ValueError) as e:  # nesting; huge int literals
        raise ToolError(f"cannot parse the expression: {type(e).__name__}") from None
    try:
        value = walk(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except RecursionError:
        raise ToolError("the expression is nested too deeply") from None
    except OverflowError:
        raise ToolError("result out of range") from None
    if isinstance(value, complex) or abs(value) > _LIMIT or not math.isfinite(value):
        raise ToolError("result out of range")
    return value


def format_number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, int) else f"{value:.10g}"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Args:
        expression: The expression, e.g. "12 * 7 + 3".
    """
    return format_number(evaluate_expression(expression))


def _split_of(expression: str) -> str:
    digest = hashlib.sha256(expression.encode()).digest()
    return "test" if digest[0] % 10 == 0 else "train"


def task_id(index: int, split: str = "train") -> str:
    """The id of task ``index`` of ``split``."""
    return f"calculator-{split}-{index}"


#: How many numbers a generated expression has, unless told: two or three, evenly.
DEFAULT_OPERANDS = (2, 3)


def make_task(index: int, split: str = "train", seed: int = 0,
              operands: Sequence[int] = DEFAULT_OPERANDS) -> Task:
    """Task ``index`` of ``split``: deterministic in (split, seed, operands, index).

    ``operands``: how many numbers an expression may have, one count picked per task (each
    number 2..99, each operator one of ``+ - *``).
    """
    rng = random.Random(f"calculator:{split}:{seed}:{index}")
    while True:
        numbers = [rng.randint(2, 99) for _ in range(rng.choice(tuple(operands)))]
        ops = [rng.choice("+-*") for _ in numbers[1:]]
        tail = "".join(f" {o} {n}" for o, n in zip(ops, numbers[1:], strict=True))
        expression = f"{numbers[0]}{tail}"
        if _split_of(expression) == split:
            break
    value = evaluate_expression(expression)
    answer = format_number(value)
    wrong = [[SolutionTurn([ToolCall("submit", {"answer": guess})])]
             for guess in (expression, format_number(value + 1))]
    # A careless reading: the expression without its last operand, through the tool. Never
    # the answer: every operand is >= 2, so dropping one changes the value.
    head = expression.rsplit(" ", 2)[0]
    wrong.append([SolutionTurn([ToolCall("calculator", {"expression": head})]),
                  SolutionTurn([ToolCall("submit", {"answer": format_number(
                      evaluate_expression(head))})])])
    return Task(
        id=task_id(index, split),
        prompt=f"What is {expression}?",
        metadata={"expression": expression, "answer": answer, WRONG_SOLUTIONS: wrong},
        solution=[
            SolutionTurn([ToolCall("calculator", {"expression": expression})]),
            SolutionTurn([ToolCall("submit", {"answer": answer})]),
        ],
    )


class NumericAnswer(Reward):
    """1.0 when the submission equals ``task.metadata["answer"]`` as a number. Its metrics
    name the ``expected`` answer and, when there was a submission, what was submitted
    (``got``), so a graded episode shows what it was held to."""

    name = "numeric_answer"

    def score(self, episode: Episode) -> RewardResult:
        answer = str(episode.task.metadata["answer"])
        expected = float(answer)
        if not episode.submitted:
            return RewardResult(0.0, {"submitted": False, "expected": answer})
        submission = str(episode.submission).strip()
        got = submission[:200]  # what a reader needs to see; the trajectory stays small
        try:
            value = float(submission)
        except ValueError:
            return RewardResult(0.0, {"submitted": True, "parsed": False,
                                      "expected": answer, "got": got})
        correct = math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)
        return RewardResult(float(correct), {"submitted": True, "parsed": True,
                                             "expected": answer, "got": got})


def _check_split(split: str) -> None:
    if split not in ("train", "test"):
        raise InvalidArgumentError(f"split must be 'train' or 'test', got {split!r}")


def _operand_counts(operands: int | Sequence[int]) -> tuple[int, ...]:
    counts = (operands,) if isinstance(operands, int) else tuple(operands)
    if not counts or not all(isinstance(c, int) and 2 <= c <= 8 for c in counts):
        raise InvalidArgumentError(
            f"operands must be a number of operands from 2 to 8, or a list of them (one is"
            f" picked per task), got {operands!r}; e.g. operands=2 or operands=[2, 3]")
    return counts


def arithmetic_tasks(split: Literal["train", "test"] = "train", num_tasks: int = 1000,
                     seed: int = 0, operands: int | Sequence[int] = DEFAULT_OPERANDS
                     ) -> TaskSource:
    """The generated arithmetic tasks of ``split`` (the task source ``calculator-arithmetic``)."""
    _check_split(split)
    counts = _operand_counts(operands)
    return GeneratedTasks(num_tasks, lambda i: make_task(i, split, seed, counts),
                          task_id=lambda i: task_id(i, split))


class CalculatorEnv(AgentEnv):
    """Compute an arithmetic expression with the calculator tool, then submit the result.

    Args:
        split: ``"train"`` or ``"test"`` (disjoint expressions).
        num_tasks: how many generated tasks the split holds.
        seed: seed of the task generator (not of episode sampling: pass that to reset).
        operands: how many numbers each generated expression has (2 to 8), or a list of
            counts to pick from per task; the default mixes 2 and 3.
        tasks: used instead of the generator: a task source, a registered task source id,
            or a task file (JSONL of ``Task.to_dict`` rows).
        max_turns: turns before truncation.
        parser: tool-call format (``hermes``, ``xml``, ``openai`` or a parser object).
        turn_timeout_s: time budget of one turn's tool calls (see ``AgentEnv``).
    """

    system_prompt = "Use the calculator tool to evaluate the expression, then submit the result."
    reward = "numeric_answer"  # by registry id: this plugin registers it (see __init__.py)
    harbor_refusal = (
        "the answer is the argument of a submit tool call, scored by a reward function over"
        " the episode; a Harbor task has no tool calls to read, only the container's files"
        " that tests/test.sh checks")
    calculator = calculator
    submit = submit

    def __init__(
        self,
        split: Literal["train", "test"] = "train",
        num_tasks: int = 1000,
        seed: int = 0,
        operands: int | Sequence[int] = DEFAULT_OPERANDS,
        tasks: str | TaskSource | None = None,
        max_turns: int = 4,
        parser: str | ToolCallParser = "hermes",
        turn_timeout_s: float | None = 600.0,
        render_mode: str | None = None,
    ):
        _check_split(split)
        source = arithmetic_tasks(split, num_tasks, seed, operands) if tasks is None else tasks
        super().__init__(source, parser=parser, max_turns=max_turns,
                         turn_timeout_s=turn_timeout_s, render_mode=render_mode)
