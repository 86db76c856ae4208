import json

import pytest

import agentgym
from agentgym.core import GeneratedTasks, SolutionTurn, Task, TaskList, ToolCall, load_tasks
from agentgym.core.errors import InvalidArgumentError, UnknownIdError
from agentgym.core.parsers import HermesParser


def test_task_round_trips_through_jsonl(tmp_path):
    tasks = [
        Task(
            "a",
            "Compute 1 + 1.",
            {"answer": "2"},
            [SolutionTurn([ToolCall("submit", {"answer": "2"})], "Easy.")],
        ),
        Task("b", [{"role": "user", "content": "Hi"}], {}, ["<tool_call>raw</tool_call>"]),
        Task("c", "No solution."),
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(t.to_dict()) for t in tasks) + "\n")
    loaded = load_tasks(path)
    assert [t.to_dict() for t in loaded] == [t.to_dict() for t in tasks]
    assert loaded.get("b").prompt_messages() == [{"role": "user", "content": "Hi"}]
    rendered = loaded.get("a").rendered(HermesParser())
    assert rendered.solution[0].startswith("Easy.\n<tool_call>")


def test_task_file_drives_the_calculator_env(tmp_path):
    task = Task(
        "mine",
        "What is 2 * 21?",
        {"expression": "2 * 21", "answer": "42"},
        [
            SolutionTurn([ToolCall("calculator", {"expression": "2 * 21"})]),
            SolutionTurn([ToolCall("submit", {"answer": "42"})]),
        ],
    )
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(task.to_dict()) + "\n")
    env = agentgym.make("calculator", tasks=str(path))
    _, info = env.reset()
    assert info["task_id"] == "mine"
    assert [env.step(t)[1] for t in env.task.solution] == [0.0, 1.0]
    env.close()


def test_bad_task_files_name_the_problem(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match="needs an 'id' and a 'prompt'"):
        load_tasks(path)
    path.write_text("{oops\n")
    with pytest.raises(ValueError, match="cannot read tasks from"):
        load_tasks(path)


def test_sources_validate_their_size():
    with pytest.raises(ValueError, match="at least one task"):
        TaskList([])
    with pytest.raises(ValueError, match="size >= 1"):
        GeneratedTasks(0, lambda i: Task(str(i), ""))
    source = GeneratedTasks(3, lambda i: Task(f"t{i}", ""))
    assert source.ids() == ["t0", "t1", "t2"]
    with pytest.raises(IndexError):
        source[3]


def test_a_generated_source_with_task_ids_makes_only_the_task_looked_up():
    made = []

    def make(i):
        made.append(i)
        return Task(f"t{i}", "")

    source = GeneratedTasks(100_000, make, task_id=lambda i: f"t{i}")
    assert source.get("t99999").id == "t99999" and made == [99999]
    assert source.ids()[:2] == ["t0", "t1"] and made == [99999]
    with pytest.raises(UnknownIdError, match="t100000"):
        source.get("t100000")
    liar = GeneratedTasks(3, lambda i: Task(f"other{i}", ""), task_id=lambda i: f"t{i}")
    with pytest.raises(InvalidArgumentError, match="came out with id 'other1'"):
        liar.get("t1")


def test_wrong_solutions_round_trip_and_render_in_the_env_format(tmp_path):
    wrong = [[SolutionTurn([ToolCall("submit", {"answer": "3"})])], ["I give up."]]
    task = Task("a", "Compute 1 + 1.", {"answer": "2", "wrong_solutions": wrong},
                [SolutionTurn([ToolCall("submit", {"answer": "2"})])])
    row = json.loads(json.dumps(task.to_dict()))
    assert row["metadata"]["wrong_solutions"][0] == [
        {"content": "", "tool_calls": [{"name": "submit", "arguments": {"answer": "3"}}]}]
    loaded = Task.from_dict(row)
    assert loaded.wrong_solutions() == wrong
    rendered = loaded.rendered(HermesParser())
    assert rendered.wrong_solutions()[0][0].startswith("<tool_call>")
    assert '"answer": "3"' in rendered.wrong_solutions()[0][0]
    assert rendered.wrong_solutions()[1] == ["I give up."]
    assert task.metadata["wrong_solutions"] is wrong  # rendering copies, never edits
    # A task with wrong solutions but no reference solution renders them too.
    bare = Task("b", "?", {"wrong_solutions": wrong}).rendered(HermesParser())
    assert bare.solution is None and bare.wrong_solutions()[0][0].startswith("<tool_call>")


def test_malformed_wrong_solutions_name_the_task_and_the_shape():
    task = Task("a", "?", {"wrong_solutions": ["not a list of turns"]})
    with pytest.raises(ValueError, match=r"task 'a': metadata\['wrong_solutions'\] must be a"):
        task.rendered(HermesParser())
    assert Task("b", "?").wrong_solutions() == []


def test_split_by_id_holds_the_same_tasks_out_whatever_the_list_holds() -> None:
    from agentgym.core.task import split_by_id

    ids = [f"task-{i}" for i in range(400)]
    train, test = (split_by_id(ids, side, str) for side in ("train", "test"))
    assert sorted(train + test) == sorted(ids) and not set(train) & set(test)
    assert 70 < len(test) < 130  # about a quarter
    assert train == [i for i in ids if i in set(train)]  # order kept
    # tasks added, others left out: none of those in both lists moves across
    other = [*ids[::3], *(f"new-{i}" for i in range(50))]
    assert set(split_by_id(other, "test", str)) & set(ids) == set(test) & set(other)
    assert len(split_by_id(ids, "test", str, test_share=0.5)) > len(test)
    with pytest.raises(InvalidArgumentError, match="split='dev'"):
        split_by_id(ids, "dev", str)
    with pytest.raises(InvalidArgumentError, match="holds none of these 1 tasks"):
        split_by_id([train[0]], "test", str)
