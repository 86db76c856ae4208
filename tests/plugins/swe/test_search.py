"""The SWE env's ``search`` tool (and the editor beside it) on a real local sandbox whose
workspace is a small git repository (the ``ws`` fixture of tests/conftest.py); and the
env's tools in order, described before any sandbox exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxLimits
from agentgym.core.tools import ToolError
from agentgym.plugins.swe.env import SWEEnv
from agentgym.plugins.swe.instance import SWEInstance
from agentgym.plugins.swe.search import RepoEditorTools, SearchTools


class Search:
    """``search`` over the ``ws`` fixture's sandbox."""

    def __init__(self, ws: Any, **options: Any):
        self.ws, self.tools = ws, SearchTools(ws.box, **options)

    def __call__(self, **arguments: Any) -> str:
        return self.ws.run(self.tools.search(**arguments))

    def fails(self, **arguments: Any) -> str:
        return self.ws.fails(self.tools.search, **arguments)


@pytest.fixture
def search(ws) -> Search:
    return Search(ws)


# ---- the env's tools and the tool API -------------------------------------------------------


def test_the_env_offers_bash_editor_search_submit_before_any_sandbox() -> None:
    instance = SWEInstance(instance_id="demo__calc-1", repo="demo/calc", base_commit="0" * 40,
                           problem_statement="add is wrong",
                           FAIL_TO_PASS=["tests/test_calc.py::test_add"])
    env = SWEEnv([instance], backend="docker", command_timeout_s=7)
    try:
        assert env.episode is None
        assert [t.name for t in env.tools()] == ["bash", "str_replace_editor", "search",
                                                 "submit"]
        for described in env.tool_schemas():
            schema = described["function"]
            assert schema["description"]
            for arg, prop in schema["parameters"]["properties"].items():
                assert prop.get("description"), f"{schema['name']}.{arg} has no description"
        for factory in env.toolsets:
            assert factory.keywords == {"command_timeout_s": 7}
        with pytest.raises(ToolError, match="not available yet"):
            env.run_coroutine(env.tools()[0].call({"command": "ls"}))
    finally:
        env.close()


def test_schema_and_calls_through_the_tool_api(ws, search: Search) -> None:
    [bound] = search.tools.tools()
    schema = bound.schema()["function"]["parameters"]
    assert schema["properties"]["mode"]["enum"] == ["definition", "references", "outline", "grep"]
    assert schema["required"] == ["mode"]
    # A method tool reached through its instance is bound to it.
    assert "README.md" in ws.run(search.tools.search.call({"mode": "grep",
                                                           "query": "area of shapes"}))
    with pytest.raises(ToolError, match="must be one of"):
        ws.run(bound.call({"mode": "find"}))


def test_the_editor_beside_search_points_to_the_outline(ws) -> None:
    [editor] = RepoEditorTools.definitions()
    assert editor.schema() == ws.editor_tools.tools()[0].schema()
    ws.bash("seq 1 1000 | sed 's/^/value = /' > long.py; cp long.py long.txt")
    tools = RepoEditorTools(ws.box)
    text = ws.run(tools.str_replace_editor(command="view", path="long.py"))
    assert "   400\tvalue = 400" in text and "   401\t" not in text
    assert "view_range=[401, 800]" in text and "outline" in text
    text = ws.run(tools.str_replace_editor(command="view", path="long.txt"))
    assert "view_range=[401, 800]" in text and "outline" not in text


# ---- paths and files ------------------------------------------------------------------------


def test_paths_outside_the_workspace_are_refused(search: Search) -> None:
    assert "outside the repository" in search.fails(mode="outline", path="/usr")
    assert "geometry/shape.py does not exist" in search.fails(mode="outline",
                                                              path="geometry/shape.py")


def test_odd_file_names_and_windows_line_endings(ws, search: Search) -> None:
    ws.bash("mkdir 'odd dir' && printf 'def f():\\r\\n    return 2\\r\\n' > \"odd dir/it's.py\"")
    path = "odd dir/it's.py"
    assert "def f()  [lines 1-2]" in search(mode="outline", path=path)
    assert "     2:     return 2" in search(mode="grep", query="return", path="odd dir",
                                             context=0)


# ---- modes ------------------------------------------------------------------------------------


def test_search_definition(search: Search) -> None:
    text = search(mode="definition", query="area")
    assert text.startswith("4 definitions of 'area':")
    assert "geometry/shapes.py:14-16  method Shape.area\n" \
           "    @abstractmethod def area(self) -> float" in text
    assert "geometry/shapes.py:24-25  method Square.area" in text
    assert "geometry/shapes.py:33-34  method Circle.area" in text
    assert "geometry/util.py:4-5  function area\n    def area(width, height)" in text
    assert "build/" not in text  # ignored by git

    one = search(mode="definition", query="Square.area")
    assert one.startswith("1 definition of 'Square.area'") and "Circle" not in one
    dotted = search(mode="definition", query="geometry.shapes.Square.area")
    assert "geometry/shapes.py:24-25  method Square.area" in dotted and "Circle" not in dotted
    assert "geometry/util.py:4-5" in search(mode="definition", query="util.area")
    assert "geometry/shapes.py:19-25  class Square\n    class Square(Shape)" in \
        search(mode="definition", query="Square")
    assert "geometry/shapes.py:5-5  variable UNIT\n    UNIT = 1.0" in \
        search(mode="definition", query="UNIT")
    scoped = search(mode="definition", query="area", path="geometry/util.py")
    assert scoped.startswith("1 definition")

    missing = search.fails(mode="definition", query="totl_area")
    assert "No definition of 'totl_area'" in missing and "Did you mean 'total_area'" in missing
    assert "needs a query" in search.fails(mode="definition")
    assert "takes a name" in search.fails(mode="definition", query="a-b")


def test_search_outline(search: Search) -> None:
    text = search(mode="outline", path="geometry/shapes.py")
    assert text.splitlines() == [
        "geometry/shapes.py (39 lines)",
        "    class Shape(ABC)  [lines 8-16]",
        "        def __init__(self, name: str)  [lines 11-12]",
        "        @abstractmethod def area(self) -> float  [lines 14-16]",
        "    class Square(Shape)  [lines 19-25]",
        "        def __init__(self, side: float)  [lines 20-22]",
        "        def area(self) -> float  [lines 24-25]",
        "    class Circle(Shape)  [lines 28-34]",
        "        def __init__(self, radius: float)  [lines 29-31]",
        "        def area(self) -> float  [lines 33-34]",
        "    def total_area(shapes: list[Shape]) -> float  [lines 37-39]",
    ]
    folder = search(mode="outline", path="geometry")
    for heading in ["geometry/__init__.py (1 line)\n    (no classes or functions)",
                    "geometry/deep/er/nested.py (2 lines)\n    def nested_helper()",
                    "geometry/util.py (10 lines)"]:
        assert heading in folder
    assert "is not a Python file" in search.fails(mode="outline", path="notes.txt")
    assert "No Python files in build (files git ignores are skipped" in search.fails(
        mode="outline", path="build")
    assert "def area()  [lines 1-2]" in search(mode="outline", path="build/generated.py")


def test_search_references_skip_strings_and_comments(search: Search) -> None:
    text = search(mode="references", query="area")
    lines = text.splitlines()
    assert lines[0] == "7 lines reference 'area', in 3 files:"
    assert "geometry/shapes.py" in lines and "geometry/util.py" in lines
    assert "    39: return sum(shape.area() for shape in shapes)" in lines
    assert "    15: def area(self) -> float:    <- definition" in lines
    assert '    10: return f"{shape.name}: {label} {shape.area()}"' in lines  # f-string code
    assert not any(line.startswith("     9:") for line in lines)  # string and comment only
    assert not any("the area of all shapes" in line for line in lines)
    assert "tests/test_shapes.py" in lines
    assert "(searched for the identifier 'area')" in search(mode="references",
                                                            query="Square.area")
    assert "No references to 'perimeter'" in search.fails(mode="references", query="perimeter")


def test_search_grep(search: Search) -> None:
    text = search(mode="grep", query=r"def \w+\(self\) -> float", context=0)
    assert text.splitlines()[0] == "3 matching lines in 1 file:"
    assert "    15:     def area(self) -> float:" in text

    near = search(mode="grep", query="radius\\*\\*2", context=1)
    assert near.splitlines() == [
        "1 matching line in 1 file (':' marks a match, '-' context):",
        "geometry/shapes.py",
        "    33-     def area(self) -> float:",
        "    34:         return 3.14159 * self.radius**2",
        "    35- ",
    ]
    everywhere = search(mode="grep", query="area", context=0)
    assert "README.md" in everywhere and "notes.txt" not in everywhere
    assert "data.bin" not in everywhere and "build/" not in everywhere
    only_md = search(mode="grep", query="area", include="*.md", context=0)
    assert only_md.splitlines()[1:] == ["README.md", "     3: Compute the area of shapes."]
    in_dir = search(mode="grep", query="area", path="tests", context=0)
    assert "geometry/" not in in_dir and "tests/test_shapes.py" in in_dir

    assert search(mode="grep", query="perimeter") == \
        "No matches for /perimeter/ in the repository."
    assert "invalid regular expression" in search.fails(mode="grep", query="(")
    assert "context must be 0 to 10" in search.fails(mode="grep", query="a", context=50)


def test_grep_outside_git_uses_plain_grep(ws, search: Search) -> None:
    ws.bash("rm -rf .git")
    text = search(mode="grep", query="radius\\*\\*2", context=1)
    assert text.splitlines()[1:] == [
        "geometry/shapes.py",
        "    33-     def area(self) -> float:",
        "    34:         return 3.14159 * self.radius**2",
        "    35- ",
    ]
    # Without git nothing is ignored, but hidden folders still are.
    assert "build/generated.py" in search(mode="definition", query="area")
    assert ".hidden" not in search(mode="grep", query="SECRET")


def test_search_sees_edits_and_reuses_unchanged_files(ws, search: Search) -> None:
    assert "perimeter" not in search(mode="outline", path="geometry/shapes.py")
    ws.edit(command="insert", path="geometry/shapes.py", insert_line=39,
            new_str="\n\ndef perimeter(side):\n    return 4 * side")
    text = search(mode="definition", query="perimeter")
    assert "geometry/shapes.py:42-43  function perimeter" in text
    ws.bash("printf 'def perimeter():\\n    pass\\n' > geometry/extra.py")
    assert "geometry/extra.py:1-2" in search(mode="definition", query="perimeter")

    # A second search re-reads only what changed: the cached trees are the same objects.
    search(mode="references", query="area")
    trees = dict(search.tools._trees)
    ws.bash("echo '# touched' >> geometry/util.py")
    search(mode="references", query="area")
    assert search.tools._trees["geometry/shapes.py"][1] is trees["geometry/shapes.py"][1]
    assert search.tools._trees["geometry/util.py"][1] is not trees["geometry/util.py"][1]


def test_search_leaves_the_shell_and_the_workspace_alone(ws, search: Search) -> None:
    ws.bash("cd tests")
    search(mode="definition", query="area")
    search(mode="grep", query="area")
    ws.edit(command="view", path=".")
    assert ws.bash("pwd") == "/workspace/tests\n[exit code 0]"
    assert ws.bash("cd /workspace && git status --short --ignored") == \
        "!! build/\n[exit code 0]"


def test_long_search_results_are_cut_with_a_hint(ws, search: Search, sample_repo: Path) -> None:
    ws.bash("for i in $(seq 1 3000); do echo \"def area_$i(): return area\"; done > many.py")
    text = Search(ws, max_output_chars=4000)(mode="references", query="area")
    assert len(text) < 4200
    assert "more lines not shown: pass path to search one directory or file" in text
    grep = search(mode="grep", query="return area$", context=0)
    assert grep.startswith("at least 997 matching lines in 1 file:\n[more matches were not"
                           " read: use a more specific pattern")  # the rest stayed in the box
    assert grep.endswith("more lines not shown: use a more specific pattern, a smaller path,"
                         " or include]")

    # A sandbox keeping little output: grep's output is bounded before the sandbox cuts it.
    small = ws.run(open_sandbox("local", template=str(sample_repo),
                                limits=SandboxLimits(output_bytes=2048)))
    try:
        ws.run(small.exec("seq 1 500 | sed 's/^/area = /' > many.txt"))
        text = ws.run(SearchTools(small).search(mode="grep", query="area", context=0))
        assert "more matches were not read" in text and "bytes of output truncated" not in text
        assert text.splitlines()[2] == "README.md"
    finally:
        ws.run(small.close())
