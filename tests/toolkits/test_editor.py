"""The shared ``str_replace_editor`` on a real local sandbox whose workspace is a small git
repository (the ``ws`` fixture of tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agentgym.core.tools import ToolError
from agentgym.toolkits import EditorTools

# ---- the tool API --------------------------------------------------------------------------


def test_schema_and_calls_through_the_tool_api(ws) -> None:
    [bound] = ws.editor_tools.tools()
    editor = bound.schema()["function"]
    params = editor["parameters"]
    assert params["required"] == ["command", "path"]
    assert params["properties"]["command"]["enum"] == [
        "view", "create", "str_replace", "insert", "undo_edit"]
    assert params["properties"]["view_range"] == {
        "type": "array", "items": {"type": "integer"},
        "description": params["properties"]["view_range"]["description"]}
    assert "-1" in params["properties"]["view_range"]["description"]
    assert "str_replace" in editor["description"]

    # Text-typed arguments (XML tool calls) are converted by the schema.
    text = ws.run(bound.call({"command": "view", "path": "geometry/shapes.py",
                              "view_range": "[1, 3]"}))
    assert "     1\t\"\"\"Shapes and their areas.\"\"\"" in text
    assert "     4\t" not in text

    for bad, expected in [
        ({"command": "explode", "path": "x"}, "must be one of"),
        ({"command": "view"}, "missing required argument(s) 'path'"),
        ({"command": "view", "path": "x", "colour": "red"}, "unknown argument(s) 'colour'"),
        ({"command": "insert", "path": "notes.txt", "insert_line": "two", "new_str": "z"},
         "must be integer"),
    ]:
        with pytest.raises(ToolError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            ws.run(bound.call(bad))


def test_every_argument_is_documented() -> None:
    [editor] = EditorTools.definitions()
    schema = editor.schema()["function"]
    assert schema["description"]
    for arg, prop in schema["parameters"]["properties"].items():
        assert prop.get("description"), f"str_replace_editor.{arg} has no description"


def test_options_are_checked(ws) -> None:
    with pytest.raises(ValueError, match="max_view_lines must be >= 1, got 0"):
        EditorTools(ws.box, max_view_lines=0)
    with pytest.raises(ValueError, match="command_timeout_s must be > 0 or None, got -1"):
        EditorTools(ws.box, command_timeout_s=-1)


# ---- view -------------------------------------------------------------------------------------


def test_view_file_with_line_numbers_and_ranges(ws) -> None:
    whole = ws.edit(command="view", path="notes.txt")
    assert whole == "notes.txt (3 lines):\n     1\tx = 1\n     2\ty = 2\n     3\tx = 1"
    assert ws.edit(command="view", path="/workspace/notes.txt") == whole
    part = ws.edit(command="view", path="geometry/shapes.py", view_range=[38, -1])
    assert part.startswith("geometry/shapes.py, lines 38-39 of 39:")
    assert "    39\t    return sum(shape.area() for shape in shapes)" in part
    assert "    37\t" not in part
    assert "lines 1-2 of 3" in ws.edit(command="view", path="notes.txt", view_range=[1, 2])

    for view_range, expected in [
        ([0, 2], "start 0 is outside notes.txt, which has 3 lines"),
        ([5, -1], "start 5 is outside"),
        ([3, 1], "end 1 is before its start 3"),
        ([1], "must be two line numbers"),
    ]:
        assert expected in ws.fails(ws.editor_tools.str_replace_editor, command="view",
                                    path="notes.txt", view_range=view_range)


def test_view_cuts_long_files_and_says_how_to_see_more(ws) -> None:
    ws.bash("seq 1 1000 | sed 's/^/value = /' > long.py")
    text = ws.edit(command="view", path="long.py")
    assert "   400\tvalue = 400" in text and "   401\t" not in text
    assert text.endswith("view again with view_range=[401, 800] to see the next lines]")
    later = ws.edit(command="view", path="long.py", view_range=[990, -1])
    assert "  1000\tvalue = 1000" in later and "cut after" not in later
    short = EditorTools(ws.box, max_view_lines=2)
    assert ws.run(short.str_replace_editor(command="view", path="notes.txt")).endswith(
        "view again with view_range=[3, 3] to see the next lines]")


def test_view_directory_lists_two_levels_without_hidden_files(ws) -> None:
    ws.bash("cd geometry && python3 -c 'import util' 2>/dev/null; mkdir -p __pycache__")
    text = ws.edit(command="view", path=".")
    lines = text.splitlines()
    assert "two levels deep" in lines[0]
    for shown in ["geometry/", "geometry/shapes.py", "geometry/deep/", "tests/test_shapes.py",
                  "README.md", "build/generated.py"]:
        assert shown in lines
    for hidden in [".git/", ".hidden/", ".gitignore", "geometry/deep/er/",
                   "geometry/deep/er/nested.py", "geometry/__pycache__/"]:
        assert hidden not in lines
    sub = ws.edit(command="view", path="geometry/deep")
    assert "geometry/deep/er/nested.py" in sub.splitlines()


def test_view_errors(ws) -> None:
    missing = ws.fails(ws.editor_tools.str_replace_editor, command="view",
                       path="geometry/shape.py")
    assert "geometry/shape.py does not exist" in missing
    assert "Did you mean 'geometry/shapes.py'" in missing
    assert "looks binary" in ws.fails(ws.editor_tools.str_replace_editor, command="view",
                                      path="data.bin")
    assert "view_range applies to files" in ws.fails(
        ws.editor_tools.str_replace_editor, command="view", path="geometry", view_range=[1, 2])


# ---- paths ------------------------------------------------------------------------------------


def test_paths_outside_the_workspace_are_refused(ws) -> None:
    for path in ["../etc/passwd", "/etc/passwd", "geometry/../../etc", "/workspacex/a"]:
        message = ws.fails(ws.editor_tools.str_replace_editor, command="view", path=path)
        assert "outside the repository" in message
    ws.bash("ln -s /etc etc-link")
    message = ws.fails(ws.editor_tools.str_replace_editor, command="view",
                       path="etc-link/passwd")
    assert "leads outside the repository (to /etc/passwd) through a symbolic link" in message
    message = ws.fails(ws.editor_tools.str_replace_editor, command="create", path="etc-link/x",
                       file_text="x")
    assert "symbolic link" in message
    assert "path is empty" in ws.fails(ws.editor_tools.str_replace_editor, command="view",
                                       path=" ")


# ---- create, str_replace, insert, undo_edit -------------------------------------------------


def test_create_writes_a_new_file_and_never_overwrites(ws) -> None:
    text = ws.edit(command="create", path="geometry/new/triangle.py",
                   file_text="def triangle():\n    return 3\n")
    assert text == "Created geometry/new/triangle.py (2 lines)."
    assert ws.read("geometry/new/triangle.py") == "def triangle():\n    return 3\n"
    message = ws.fails(ws.editor_tools.str_replace_editor, command="create", path="notes.txt",
                       file_text="replaced")
    assert "notes.txt already exists (file); create never overwrites" in message
    assert ws.read("notes.txt") == "x = 1\ny = 2\nx = 1\n"
    assert "create needs file_text" in ws.fails(ws.editor_tools.str_replace_editor,
                                                command="create", path="other.py")
    broken = ws.edit(command="create", path="broken.py", file_text="def f(:\n")
    assert "Warning: broken.py no longer parses as Python" in broken


def test_str_replace_edits_exactly_one_occurrence(ws) -> None:
    text = ws.edit(command="str_replace", path="geometry/shapes.py",
                   old_str="        return 3.14159 * self.radius**2",
                   new_str="        return math.pi * self.radius**2")
    assert text.startswith("Edited geometry/shapes.py. The edited region:")
    assert "    34\t        return math.pi * self.radius**2" in text
    assert "    30\t" in text and "    38\t" in text and "    29\t" not in text
    assert "math.pi * self.radius**2" in ws.read("geometry/shapes.py")
    assert "3.14159" not in ws.read("geometry/shapes.py")
    assert "M geometry/shapes.py" in ws.bash("git status --short")

    # Deleting text: new_str omitted.
    ws.edit(command="str_replace", path="notes.txt", old_str="y = 2\n")
    assert ws.read("notes.txt") == "x = 1\nx = 1\n"


def test_str_replace_errors_say_why_and_what_to_do(ws) -> None:
    def replace(**arguments: Any) -> str:
        return ws.fails(ws.editor_tools.str_replace_editor, command="str_replace", **arguments)

    several = replace(path="notes.txt", old_str="x = 1", new_str="x = 2")
    assert "old_str has 2 occurrences in notes.txt, at lines 1, 3" in several
    assert "Include more surrounding lines" in several

    absent = replace(path="notes.txt", old_str="z = 26", new_str="z = 0")
    assert "old_str has no occurrence in notes.txt" in absent

    indented = replace(path="geometry/shapes.py", old_str="  def area(self) -> float:\n"
                       "      return self.side * self.side * UNIT", new_str="")
    assert "has no occurrence" in indented
    assert "It does match lines 24-25 if whitespace at the ends of lines is ignored" in indented
    assert "indentation" in indented

    numbered = replace(path="notes.txt", old_str="     2\ty = 2", new_str="y = 3")
    assert "line numbers view shows" in numbered

    assert "old_str is empty" in replace(path="notes.txt", old_str="", new_str="a")
    assert "needs old_str" in replace(path="notes.txt", new_str="a")
    assert "identical" in replace(path="notes.txt", old_str="y = 2", new_str="y = 2")
    assert "is a directory, not a file" in replace(path="geometry", old_str="a", new_str="b")
    assert "does not exist" in replace(path="nope.py", old_str="a", new_str="b")
    assert ws.read("notes.txt") == "x = 1\ny = 2\nx = 1\n"


def test_str_replace_warns_when_the_edit_breaks_python(ws) -> None:
    text = ws.edit(command="str_replace", path="geometry/util.py",
                   old_str="def area(width, height):", new_str="def area(width, height:")
    assert "Warning: geometry/util.py no longer parses as Python" in text
    assert "undo_edit" in text


def test_insert_adds_lines_after_the_given_line(ws) -> None:
    text = ws.edit(command="insert", path="notes.txt", insert_line=1, new_str="a = 0")
    assert ws.read("notes.txt") == "x = 1\na = 0\ny = 2\nx = 1\n"
    assert "Inserted 1 line after line 1 of notes.txt" in text
    assert "     2\ta = 0" in text
    ws.edit(command="insert", path="notes.txt", insert_line=0, new_str="# top\n# two\n")
    ws.edit(command="insert", path="notes.txt", insert_line=6, new_str="end = 1")
    assert ws.read("notes.txt") == "# top\n# two\nx = 1\na = 0\ny = 2\nx = 1\nend = 1\n"

    ws.bash("printf 'no newline' > tail.txt")
    ws.edit(command="insert", path="tail.txt", insert_line=1, new_str="next")
    assert ws.read("tail.txt") == "no newline\nnext\n"

    message = ws.fails(ws.editor_tools.str_replace_editor, command="insert", path="notes.txt",
                       insert_line=99, new_str="z")
    assert "insert_line 99 is outside notes.txt, which has 7 lines: use 0 (the top) to 7" \
        in message
    assert "needs insert_line" in ws.fails(ws.editor_tools.str_replace_editor,
                                           command="insert", path="notes.txt", new_str="z")


def test_undo_edit_reverts_edits_newest_first(ws) -> None:
    original = ws.read("notes.txt")
    ws.edit(command="str_replace", path="notes.txt", old_str="y = 2", new_str="y = 3")
    ws.edit(command="insert", path="notes.txt", insert_line=0, new_str="# header")
    first = ws.edit(command="undo_edit", path="notes.txt")
    assert "Undid the last edit of notes.txt (1 earlier edit can still be undone)" in first
    assert ws.read("notes.txt") == "x = 1\ny = 3\nx = 1\n"
    second = ws.edit(command="undo_edit", path="notes.txt")
    assert "     2\ty = 2" in second
    assert ws.read("notes.txt") == original
    message = ws.fails(ws.editor_tools.str_replace_editor, command="undo_edit",
                       path="notes.txt")
    assert "No edit of notes.txt to undo" in message and "not changes made through bash" in message

    ws.edit(command="create", path="made.py", file_text="x = 1\n")
    assert "the file is removed" in ws.edit(command="undo_edit", path="made.py")
    assert "made.py" not in ws.bash("ls")

    # Changes made through bash after an edit are discarded by its undo, and it says so.
    ws.edit(command="str_replace", path="notes.txt", old_str="y = 2", new_str="y = 4")
    ws.bash("echo extra >> notes.txt")
    assert "changed since that edit" in ws.edit(command="undo_edit", path="notes.txt")
    assert ws.read("notes.txt") == original


def test_odd_file_names_and_windows_line_endings(ws) -> None:
    ws.bash("mkdir 'odd dir' && printf 'def f():\\r\\n    return 1\\r\\n' > \"odd dir/it's.py\"")
    path = "odd dir/it's.py"
    assert ws.edit(command="view", path=path) == \
        "odd dir/it's.py (2 lines):\n     1\tdef f():\n     2\t    return 1"
    ws.edit(command="str_replace", path=path, old_str="def f():\n    return 1",
            new_str="def f():\n    return 2")
    assert ws.read(path) == "def f():\r\n    return 2\r\n"
    ws.edit(command="insert", path=path, insert_line=2, new_str="X = 3")
    assert ws.read(path) == "def f():\r\n    return 2\r\nX = 3\r\n"


def test_the_editor_leaves_the_shell_and_the_workspace_alone(ws) -> None:
    ws.bash("cd tests")
    ws.edit(command="view", path=".")
    ws.edit(command="view", path="geometry/shapes.py")
    assert ws.bash("pwd") == "/workspace/tests\n[exit code 0]"
    assert ws.bash("cd /workspace && git status --short --ignored") == \
        "!! build/\n[exit code 0]"
