"""Bug injection for swe-synth: where a module can be mutated, applying mutations, and
refusing mutants whose diff gives the bug away.

**Sites.** :func:`mutation_sites` walks a module with libcst and lists every
:class:`Site` inside its functions (module and class bodies, annotations and docstrings are
left alone), in a fixed order. Each site is one change of one kind:

* point kinds (:data:`MUTATION_KINDS`, the only ones ``difficulty="easy"`` uses):
  ``comparison`` (flip or shift ``<``, ``==``, ``in``, ...), ``operator`` (``+`` <-> ``-``,
  ``and`` <-> ``or``, ...), ``constant`` (an integer or ``True``/``False``), ``condition``
  (negate an ``if`` or a conditional expression), ``statement`` (drop a simple statement),
  ``arguments`` (swap the first two positional arguments of a call);
* block kinds (:data:`BLOCK_KINDS`, added for ``medium`` and ``hard``): ``branches`` (swap
  the bodies of an ``if``/``else``), ``block`` (drop a small ``if`` block without ``else``:
  a guard, a special case, an early return), ``reorder`` (swap two adjacent statements
  that share a name one of them writes), ``loop`` (a ``range`` bound one short, or
  ``break`` <-> ``continue``). :data:`MULTI_LINE_KINDS` are the ones whose diff spans
  several lines.

A site is named by its ``index`` in that walk, so :func:`apply_mutations` can apply several
sites of one module in one walk (the walk offers every site whether or not one was applied,
so the indices stay those of the listing) and checks that each is still the site it was.

**Giveaways.** :func:`giveaway` compares a mutant with its original and names what would
tell a reader where the bug is and how to fix it, or None: a negated negative comparison
(``not (a not in b)``), a double ``not``, arithmetic that does nothing (``i + 0``,
``x * 1``), an ``x[0:]`` slice, a constant condition (``if True:``, ``while False:``), a
body reduced to ``pass``, or a change of whitespace alone (a diff that reads like a typo:
``<=`` -> ``< =``). Each construct counts only where the mutant holds more of it than the
original did, so code that was written that way is no giveaway.
"""

from __future__ import annotations

import ast
import difflib
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym.core.errors import InvalidArgumentError

#: Single-point mutation kinds (the ``easy`` tasks' kinds).
MUTATION_KINDS = ("comparison", "operator", "constant", "condition", "statement", "arguments")
#: Kinds added for ``medium`` and ``hard`` tasks.
BLOCK_KINDS = ("branches", "block", "reorder", "loop")
#: Kinds whose diff spans several lines.
MULTI_LINE_KINDS = ("branches", "block", "reorder")
ALL_KINDS = MUTATION_KINDS + BLOCK_KINDS


@dataclass(frozen=True)
class Site:
    """One mutation a file admits: the ``index``-th offered while walking its syntax tree."""

    path: str
    index: int
    kind: str
    function: str  # qualified name of the enclosing function
    change: str  # e.g. "< -> >="


def _code(node: Any) -> str:
    import libcst as cst

    return cst.Module([]).code_for_node(node)


def _mutator_class() -> type:
    """The libcst transformer, built on first use so that importing this module stays fast."""
    import libcst as cst
    import libcst.matchers as m

    negated = {cst.LessThan: cst.GreaterThanEqual, cst.GreaterThan: cst.LessThanEqual,
               cst.LessThanEqual: cst.GreaterThan, cst.GreaterThanEqual: cst.LessThan,
               cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal, cst.Is: cst.IsNot,
               cst.IsNot: cst.Is, cst.In: cst.NotIn, cst.NotIn: cst.In}
    shifted = {cst.LessThan: cst.LessThanEqual, cst.LessThanEqual: cst.LessThan,
               cst.GreaterThan: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.GreaterThan}
    binary = {cst.Add: cst.Subtract, cst.Subtract: cst.Add, cst.Multiply: cst.Divide,
              cst.Divide: cst.Multiply, cst.FloorDivide: cst.Divide, cst.Modulo: cst.FloorDivide,
              cst.Power: cst.Multiply, cst.LeftShift: cst.RightShift,
              cst.RightShift: cst.LeftShift, cst.BitOr: cst.BitAnd, cst.BitAnd: cst.BitOr,
              cst.BitXor: cst.BitOr}
    augmented = {cst.AddAssign: cst.SubtractAssign, cst.SubtractAssign: cst.AddAssign,
                 cst.BitOrAssign: cst.BitAndAssign, cst.BitAndAssign: cst.BitOrAssign}
    boolean = {cst.And: cst.Or, cst.Or: cst.And}
    strings = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
    # Statements whose place in a block is their meaning: never reordered.
    anchored = (cst.Return, cst.Raise, cst.Pass, cst.Global, cst.Nonlocal, cst.Break,
                cst.Continue, cst.Import, cst.ImportFrom)

    def same_spacing(old: Any, new_class: type) -> Any:
        kwargs = {k: getattr(old, k) for k in ("whitespace_before", "whitespace_after")
                  if hasattr(old, k)}
        return new_class(**kwargs)

    def negate(expr: Any) -> Any:
        if (isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not)
                and not expr.lpar):
            return expr.expression
        # Parenthesized where `not` would bind differently or read ambiguously (`not a is b`).
        if isinstance(expr, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                             cst.NamedExpr)) and not expr.lpar:
            expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.UnaryOperation(operator=cst.Not(), expression=expr)

    def is_docstring(statement: Any) -> bool:
        return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Expr)
                and isinstance(statement.body[0].value, strings))

    def names(node: Any) -> set[str]:
        return {name.value for name in m.findall(node, m.Name())} - {"self", "cls"}

    def base_name(target: Any) -> str | None:
        while isinstance(target, (cst.Attribute, cst.Subscript)):
            target = target.value
        return target.value if isinstance(target, cst.Name) else None

    def written(statement: Any) -> set[str]:
        """Names a simple statement assigns, or whose object it changes (``x.append()``,
        ``x[i] = ...``)."""
        targets: list[Any] = []
        for small in statement.body:
            if isinstance(small, cst.Assign):
                targets += [t.target for t in small.targets]
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                targets.append(small.target)
            elif (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                    and isinstance(small.value.func, cst.Attribute)):
                targets.append(small.value.func.value)
        flat: list[Any] = []
        for target in targets:
            flat += ([e.value for e in target.elements]
                     if isinstance(target, (cst.Tuple, cst.List)) else [target])
        return {name for name in map(base_name, flat) if name is not None} - {"self", "cls"}

    def reorderable(statement: Any) -> bool:
        return (isinstance(statement, cst.SimpleStatementLine) and not is_docstring(statement)
                and not any(isinstance(s, anchored) for s in statement.body))

    def without(body: list[Any], i: int) -> list[Any]:
        """``body`` less its ``i``-th statement, whose leading comments and blank lines go
        to the next one."""
        body = list(body)
        if i + 1 < len(body):
            body[i + 1] = body[i + 1].with_changes(
                leading_lines=[*body[i].leading_lines, *body[i + 1].leading_lines])
        del body[i]
        return body

    def one_short(bound: Any) -> Any | None:
        """``bound - 1`` as a plain expression (``n - 1``, ``len(x) - 1``, ``3`` for 4), or
        None where it would read oddly (``n + 1 - 1``) or not be a number."""
        if isinstance(bound, cst.Integer):
            value = int(bound.value, 0)
            return bound.with_changes(value=str(value - 1)) if value > 1 else None
        if isinstance(bound, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            return cst.BinaryOperation(left=bound, operator=cst.Subtract(
                whitespace_before=cst.SimpleWhitespace(" "),
                whitespace_after=cst.SimpleWhitespace(" ")), right=cst.Integer("1"))
        return None

    class Mutator(cst.CSTTransformer):
        """Lists the mutation sites of a module (no ``targets``), or applies some.

        Every site is offered whether or not one was applied, so that indices are those of
        the listing walk; kinds outside ``kinds`` are neither offered nor counted."""

        def __init__(self, path: str, targets: Iterable[int] = (),
                     kinds: Sequence[str] = MUTATION_KINDS):
            super().__init__()
            self.path, self.targets, self.kinds = path, frozenset(targets), frozenset(kinds)
            self.sites: list[Site] = []
            self.scope: list[tuple[str, bool]] = []  # (name, is a function)
            self.annotations = 0

        def offer(self, kind: str, node: Any, change: str) -> bool:
            """Record a site; True when it is one to apply."""
            if (kind not in self.kinds or self.annotations
                    or not any(is_function for _, is_function in self.scope)):
                return False
            index = len(self.sites)
            function = ".".join(name for name, _ in self.scope)
            self.sites.append(Site(self.path, index, kind, function, change))
            return index in self.targets

        # scope
        def visit_ClassDef(self, node: Any) -> None:
            self.scope.append((node.name.value, False))

        def leave_ClassDef(self, original: Any, updated: Any) -> Any:
            self.scope.pop()
            return updated

        def visit_FunctionDef(self, node: Any) -> None:
            self.scope.append((node.name.value, True))

        def leave_FunctionDef(self, original: Any, updated: Any) -> Any:
            self.scope.pop()
            return updated

        def visit_Annotation(self, node: Any) -> None:
            self.annotations += 1

        def leave_Annotation(self, original: Any, updated: Any) -> Any:
            self.annotations -= 1
            return updated

        # comparison
        def leave_Comparison(self, original: Any, updated: Any) -> Any:
            result = updated
            for i, target in enumerate(updated.comparisons):
                for table in (negated, shifted):
                    new_class = table.get(type(target.operator))
                    if new_class is None:
                        continue
                    new = same_spacing(target.operator, new_class)
                    change = f"{_code(target.operator).strip()} -> {_code(new).strip()}"
                    if self.offer("comparison", original, change):
                        comparisons = list(updated.comparisons)
                        comparisons[i] = target.with_changes(operator=new)
                        result = updated.with_changes(comparisons=comparisons)
            return result

        # operator
        def swap_operator(self, original: Any, updated: Any, new_class: type | None) -> Any:
            if new_class is None:
                return updated
            new = same_spacing(updated.operator, new_class)
            if self.offer("operator", original,
                          f"{_code(updated.operator).strip()} -> {_code(new).strip()}"):
                return updated.with_changes(operator=new)
            return updated

        def leave_BinaryOperation(self, original: Any, updated: Any) -> Any:
            on_strings = isinstance(updated.left, strings) or isinstance(updated.right, strings)
            if on_strings and isinstance(updated.operator, (cst.Add, cst.Modulo)):
                return updated  # concatenation, %-formatting
            return self.swap_operator(original, updated, binary.get(type(updated.operator)))

        def leave_BooleanOperation(self, original: Any, updated: Any) -> Any:
            return self.swap_operator(original, updated, boolean[type(updated.operator)])

        def leave_AugAssign(self, original: Any, updated: Any) -> Any:
            return self.swap_operator(original, updated, augmented.get(type(updated.operator)))

        # constant
        def leave_Integer(self, original: Any, updated: Any) -> Any:
            try:
                value = int(updated.value, 0)
            except ValueError:
                return updated
            new = 0 if value == 1 else value + 1
            if self.offer("constant", original, f"{updated.value} -> {new}"):
                return updated.with_changes(value=str(new))
            return updated

        def leave_Name(self, original: Any, updated: Any) -> Any:
            if updated.value not in ("True", "False"):
                return updated
            new = "False" if updated.value == "True" else "True"
            if self.offer("constant", original, f"{updated.value} -> {new}"):
                return updated.with_changes(value=new)
            return updated

        # condition, branches
        def leave_If(self, original: Any, updated: Any) -> Any:
            result = updated
            if self.offer("condition", original.test, "if c -> if not c"):
                result = updated.with_changes(test=negate(updated.test))
            orelse = original.orelse
            if (isinstance(orelse, cst.Else) and isinstance(original.body, cst.IndentedBlock)
                    and isinstance(orelse.body, cst.IndentedBlock)
                    and _code(original.body).strip() != _code(orelse.body).strip()
                    and self.offer("branches", original, "swap the if and else bodies")):
                result = updated.with_changes(
                    body=updated.body.with_changes(body=updated.orelse.body.body),
                    orelse=updated.orelse.with_changes(
                        body=updated.orelse.body.with_changes(body=updated.body.body)))
            return result

        def leave_IfExp(self, original: Any, updated: Any) -> Any:
            if self.offer("condition", original.test, "x if c else y -> x if not c else y"):
                return updated.with_changes(test=negate(updated.test))
            return updated

        # statement, block, reorder
        def leave_IndentedBlock(self, original: Any, updated: Any) -> Any:
            body = list(updated.body)
            result = updated
            offered = len(self.sites)
            for i, statement in enumerate(body):
                if not isinstance(statement, cst.SimpleStatementLine) or is_docstring(
                        statement) or any(isinstance(s, (cst.Pass, cst.Global, cst.Nonlocal))
                                          for s in statement.body):
                    continue
                last = i == len(body) - 1
                # A comment above the dropped line would vanish and hint at the fix.
                if last and any(line.comment for line in statement.leading_lines):
                    continue
                text = _code(statement).strip().splitlines()[-1][:60]
                if not self.offer("statement", original.body[i], f"drop {text!r}"):
                    continue
                if len(body) == 1 or (len(body) == 2 and is_docstring(body[0])):
                    changed = list(body)
                    changed[i] = statement.with_changes(body=[cst.Pass()])
                else:
                    changed = without(body, i)
                result = updated.with_changes(body=changed)
            for i, statement in enumerate(body):
                # A small `if` without `else`: a guard, a special case, an early return.
                if (not isinstance(statement, cst.If) or statement.orelse is not None
                        or not isinstance(statement.body, cst.IndentedBlock)
                        or len(statement.body.body) > 3):
                    continue
                rest = body[:i] + body[i + 1:]
                if not rest or all(is_docstring(s) for s in rest):
                    continue  # the block would be left empty
                if i == len(body) - 1 and any(line.comment for line in statement.leading_lines):
                    continue
                test = _code(statement.test).strip().splitlines()[0][:50]
                if self.offer("block", original.body[i], f"drop 'if {test}:' block"):
                    result = updated.with_changes(body=without(body, i))
            for i in range(len(body) - 1):
                first, second = body[i], body[i + 1]
                if not (reorderable(first) and reorderable(second)):
                    continue
                if _code(first).strip() == _code(second).strip() or not (
                        written(first) & names(second) or written(second) & names(first)):
                    continue  # swapping independent statements changes nothing
                texts = [_code(s).strip().splitlines()[0][:30] for s in (first, second)]
                if self.offer("reorder", original.body[i], f"swap {texts[0]!r} and {texts[1]!r}"):
                    changed = list(body)
                    changed[i] = second.with_changes(leading_lines=first.leading_lines)
                    changed[i + 1] = first.with_changes(leading_lines=second.leading_lines)
                    result = updated.with_changes(body=changed)
            if len(self.targets & set(range(offered, len(self.sites)))) > 1:
                raise InvalidArgumentError(
                    f"two mutations of one block of {self.path} cannot be applied"
                    " together; pick sites of different blocks")
            return result

        # loop
        def leave_For(self, original: Any, updated: Any) -> Any:
            call = original.iter
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
                    and call.func.value == "range" and 1 <= len(call.args) <= 2
                    and all(a.keyword is None and not a.star for a in call.args)):
                return updated
            shorter = one_short(call.args[-1].value)
            if shorter is None:
                return updated
            change = f"range(..{_code(call.args[-1].value)[:25]}) one short"
            if self.offer("loop", original, change):
                args = list(updated.iter.args)
                args[-1] = args[-1].with_changes(value=shorter)
                return updated.with_changes(iter=updated.iter.with_changes(args=args))
            return updated

        def leave_Break(self, original: Any, updated: Any) -> Any:
            if self.offer("loop", original, "break -> continue"):
                return cst.Continue(semicolon=updated.semicolon)
            return updated

        def leave_Continue(self, original: Any, updated: Any) -> Any:
            if self.offer("loop", original, "continue -> break"):
                return cst.Break(semicolon=updated.semicolon)
            return updated

        # arguments
        def leave_Call(self, original: Any, updated: Any) -> Any:
            args = list(updated.args)
            if len(args) < 2 or any(a.keyword is not None or a.star for a in args[:2]):
                return updated
            first, second = _code(args[0].value), _code(args[1].value)
            if first == second:
                return updated
            if self.offer("arguments", original, f"f({first[:25]}, {second[:25]}) swapped"):
                args[0], args[1] = (args[0].with_changes(value=args[1].value),
                                    args[1].with_changes(value=args[0].value))
                return updated.with_changes(args=args)
            return updated

    return Mutator


def mutation_sites(source: str, path: str,
                   kinds: Sequence[str] = MUTATION_KINDS) -> list[Site]:
    """Every mutation site of ``kinds`` in ``source`` (the module at ``path``), in a fixed
    order."""
    import libcst as cst

    mutator = _mutator_class()(path, kinds=kinds)
    cst.parse_module(source).visit(mutator)
    return mutator.sites


def apply_mutations(source: str, sites: Sequence[Site],
                    kinds: Sequence[str] = MUTATION_KINDS) -> str:
    """``source`` with every one of ``sites`` (all of one file, listed by
    :func:`mutation_sites` with the same ``kinds``) applied in one walk.

    Raises:
        ValueError: a site is not the one the walk finds at its index (the file changed,
            or it was listed with other ``kinds``), two sites are of different files, or
            two change statements of one block.
    """
    import libcst as cst

    paths = {site.path for site in sites}
    if len(paths) > 1:
        raise InvalidArgumentError(
            f"apply_mutations takes the sites of one file, got {sorted(paths)}")
    path = sites[0].path if sites else ""
    mutator = _mutator_class()(path, targets=[site.index for site in sites], kinds=kinds)
    mutated = cst.parse_module(source).visit(mutator).code
    for site in sites:
        found = mutator.sites[site.index] if len(mutator.sites) > site.index else None
        if found != site:
            raise InvalidArgumentError(f"site {site} is not in {site.path} any more")
    return mutated


def apply_mutation(source: str, site: Site, kinds: Sequence[str] = MUTATION_KINDS) -> str:
    """``source`` with the mutation ``site`` applied (see :func:`apply_mutations`)."""
    return apply_mutations(source, [site], kinds)


def candidate_order(sites: list[Site], rng: random.Random) -> list[Site]:
    """Sites shuffled within each kind, then taken one kind after another (the point kinds
    first), so that the first candidates are not all of one kind."""
    by_kind: dict[str, list[Site]] = {kind: [] for kind in ALL_KINDS}
    for site in sites:
        by_kind[site.kind].append(site)
    for kind in ALL_KINDS:  # shuffling an empty list draws nothing: easy's order is kept
        rng.shuffle(by_kind[kind])
    ordered: list[Site] = []
    while any(by_kind.values()):
        for kind in ALL_KINDS:
            if by_kind[kind]:
                ordered.append(by_kind[kind].pop())
    return ordered


# ---- giveaways -------------------------------------------------------------------------------

_NEGATIVE = (ast.NotIn, ast.IsNot, ast.NotEq)
_ADDITIVE_ZERO = (ast.Add, ast.Sub, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)
_MULTIPLICATIVE_ONE = (ast.Mult, ast.Div, ast.FloorDiv, ast.Pow)
_SPLIT_OPERATOR = re.compile(r"[<>=!]\s+=|<\s+<|>\s+>|\*\s+\*|/\s+/|-\s+>")


def _is_constant(node: ast.AST, value: object) -> bool:
    return (isinstance(node, ast.Constant) and type(node.value) is type(value)
            and node.value == value)


def _pass_only(body: list[ast.stmt]) -> bool:
    statements = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(
        s.value, ast.Constant) and isinstance(s.value.value, str))]
    return len(statements) == 1 and isinstance(statements[0], ast.Pass)


def _constructs(tree: ast.AST) -> dict[str, int]:
    """How often each giveaway construct occurs in ``tree``."""
    found = {key: 0 for key in GIVEAWAYS}
    for node in ast.walk(tree):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operand = node.operand
            if (isinstance(operand, ast.Compare) and len(operand.ops) == 1
                    and isinstance(operand.ops[0], _NEGATIVE)):
                found["negated negative comparison"] += 1
            elif isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.Not):
                found["double not"] += 1
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            left = node.left if isinstance(node, ast.BinOp) else None
            right = node.right if isinstance(node, ast.BinOp) else node.value
            if ((isinstance(node.op, _ADDITIVE_ZERO) and _is_constant(right, 0))
                    or (isinstance(node.op, ast.Add) and left is not None
                        and _is_constant(left, 0))
                    or (isinstance(node.op, _MULTIPLICATIVE_ONE) and _is_constant(right, 1))
                    or (isinstance(node.op, ast.Mult) and left is not None
                        and _is_constant(left, 1))):
                found["arithmetic that does nothing"] += 1
        elif isinstance(node, ast.Slice) and node.lower is not None and _is_constant(
                node.lower, 0):
            found["a slice from 0"] += 1
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            if isinstance(test, ast.Constant):
                found["a constant condition"] += 1
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt) and (
                    _pass_only(block)):
                found["a body reduced to pass"] += 1
    return found


#: What :func:`giveaway` looks for (besides a whitespace-only change).
GIVEAWAYS = ("negated negative comparison", "double not", "arithmetic that does nothing",
             "a slice from 0", "a constant condition", "a body reduced to pass")


def giveaway(original: str, mutated: str) -> str | None:
    """What in ``mutated`` (a mutant of the module ``original``) gives the bug away, or None
    (see the module docstring): one of :data:`GIVEAWAYS`, ``"a whitespace-only change"`` or
    ``"an operator split by a space"``."""
    old_lines, new_lines = original.splitlines(), mutated.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old, new = "\n".join(old_lines[i1:i2]), "\n".join(new_lines[j1:j2])
        if re.sub(r"\s", "", old) == re.sub(r"\s", "", new):
            return "a whitespace-only change"
        if len(_SPLIT_OPERATOR.findall(new)) > len(_SPLIT_OPERATOR.findall(old)):
            return "an operator split by a space"
    try:
        before, after = _constructs(ast.parse(original)), _constructs(ast.parse(mutated))
    except SyntaxError:
        return None  # compiling the mutant rejects it on its own
    return next((key for key in GIVEAWAYS if after[key] > before[key]), None)


__all__ = ["ALL_KINDS", "BLOCK_KINDS", "GIVEAWAYS", "MULTI_LINE_KINDS", "MUTATION_KINDS",
           "Site", "apply_mutation", "apply_mutations", "candidate_order", "giveaway",
           "mutation_sites"]
