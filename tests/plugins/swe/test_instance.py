"""SWEInstance, load_instances, image_name and the patch helpers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.core.errors import MissingResourceError
from agentgym.plugins.swe.instance import (
    InvalidInstanceError,
    SWEInstance,
    image_name,
    is_test_path,
    load_instances,
    patch_files,
    split_patch,
)


def row(**overrides: object) -> dict[str, object]:
    """A SWE-bench row as the hub datasets store it (test lists JSON-encoded)."""
    data: dict[str, object] = {
        "repo": "django/django",
        "instance_id": "django__django-11099",
        "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
        "patch": "diff --git a/django/x.py b/django/x.py\n",
        "test_patch": "diff --git a/tests/x.py b/tests/x.py\n",
        "problem_statement": "UsernameValidator allows trailing newline in usernames",
        "hints_text": "",
        "created_at": "2019-03-20T03:46:18Z",
        "version": "3.0",
        "FAIL_TO_PASS": json.dumps(["test_ascii_validator (auth_tests.test_validators.X)"]),
        "PASS_TO_PASS": json.dumps(["test_help_text (auth_tests.test_validators.Y)"]),
        "environment_setup_commit": "419a78300f7cd27611196e1e464d50fd0385ff27",
    }
    data.update(overrides)
    return data


# --- SWEInstance ---------------------------------------------------------------------


def test_from_dict_decodes_json_encoded_test_lists() -> None:
    instance = SWEInstance.from_dict(row())
    assert instance.FAIL_TO_PASS == ["test_ascii_validator (auth_tests.test_validators.X)"]
    assert instance.PASS_TO_PASS == ["test_help_text (auth_tests.test_validators.Y)"]
    assert instance.tests == instance.FAIL_TO_PASS + instance.PASS_TO_PASS
    as_lists = SWEInstance.from_dict(row(FAIL_TO_PASS=instance.FAIL_TO_PASS,
                                         PASS_TO_PASS=instance.PASS_TO_PASS))
    assert as_lists == instance
    assert instance.test_cmd is None and instance.package is None and instance.image is None


def test_to_dict_round_trips_with_extras_and_agentgym_fields() -> None:
    instance = SWEInstance.from_dict(row(
        difficulty="<15 min fix", my_note="kept", package="toolz", package_version="1.2.0",
        test_cmd="python -m pytest -rA", image="me/img:1"))
    assert instance.extra == {"difficulty": "<15 min fix", "my_note": "kept"}
    data = instance.to_dict()
    assert data["difficulty"] == "<15 min fix" and data["FAIL_TO_PASS"] == instance.FAIL_TO_PASS
    assert SWEInstance.from_dict(json.loads(json.dumps(data))) == instance


def test_from_dict_normalises_hub_quirks() -> None:
    instance = SWEInstance.from_dict(row(version=3.0, hints_text=None, PASS_TO_PASS="[]"))
    assert instance.version == "3.0" and instance.hints_text == "" and instance.PASS_TO_PASS == []


def test_missing_required_field_is_named() -> None:
    data = row()
    del data["base_commit"]
    with pytest.raises(InvalidInstanceError, match="missing required field 'base_commit'"):
        SWEInstance.from_dict(data, where="tasks.jsonl line 7")
    with pytest.raises(InvalidInstanceError, match=r"tasks\.jsonl line 7"):
        SWEInstance.from_dict(data, where="tasks.jsonl line 7")


def test_misspelt_field_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(InvalidInstanceError, match=r"'FAIL_TO_PAS'.*did you mean 'FAIL_TO_PASS'"):
        SWEInstance.from_dict(row(FAIL_TO_PAS="[]"))
    with pytest.raises(InvalidInstanceError, match="did you mean 'test_cmd'"):
        SWEInstance.from_dict(row(test_cmds="pytest"))


def test_bad_values_are_explained() -> None:
    with pytest.raises(InvalidInstanceError, match="FAIL_TO_PASS is a string but not a JSON"):
        SWEInstance.from_dict(row(FAIL_TO_PASS="test_a, test_b"))
    with pytest.raises(InvalidInstanceError, match="list of test ids"):
        SWEInstance.from_dict(row(FAIL_TO_PASS=json.dumps({"a": 1})))
    with pytest.raises(InvalidInstanceError, match="package_version"):
        SWEInstance.from_dict(row(package="toolz"))
    with pytest.raises(InvalidInstanceError, match="JSON object"):
        SWEInstance.from_dict(["not", "a", "dict"])  # type: ignore[arg-type]


# --- load_instances --------------------------------------------------------------------


def test_load_jsonl_json_and_parquet(tmp_path: Path) -> None:
    rows = [row(), row(instance_id="astropy__astropy-12907", repo="astropy/astropy",
                       FAIL_TO_PASS=json.dumps(
                           ["astropy/modeling/tests/test_separable.py::test_a[p0]"]))]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (tmp_path / "list.json").write_text(json.dumps(rows))
    (tmp_path / "wrapped.json").write_text(json.dumps({"instances": rows}))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    expected = [SWEInstance.from_dict(r) for r in rows]
    for name in ("t.jsonl", "list.json", "wrapped.json", "t.parquet"):
        assert load_instances(tmp_path / name) == expected, name
    assert load_instances(str(tmp_path / "t.jsonl"))[1].FAIL_TO_PASS == [
        "astropy/modeling/tests/test_separable.py::test_a[p0]"]


def test_load_directory_picks_the_split(tmp_path: Path) -> None:
    data = tmp_path / "snapshot" / "data"
    data.mkdir(parents=True)
    (data / "test-00000-of-00001.jsonl").write_text(json.dumps(row()) + "\n")
    (data / "dev-00000-of-00001.jsonl").write_text(
        json.dumps(row(instance_id="other__other-1")) + "\n")
    assert [i.instance_id for i in load_instances(tmp_path / "snapshot")] == [
        "django__django-11099"]
    assert [i.instance_id for i in load_instances(tmp_path / "snapshot", split="dev")] == [
        "other__other-1"]


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad = row()
    del bad["FAIL_TO_PASS"]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row()) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(InvalidInstanceError, match=r"tasks.jsonl line 3: missing required"
                                                   r" field 'FAIL_TO_PASS'"):
        load_instances(path)
    path.write_text(json.dumps(row()) + "\n{oops\n")
    with pytest.raises(InvalidInstanceError, match=r"tasks.jsonl line 2: not valid JSON"):
        load_instances(path)
    path.write_text(json.dumps(row()) + "\n" + json.dumps(row()) + "\n")
    with pytest.raises(InvalidInstanceError, match=r"line 2: instance_id 'django__django-11099'"
                                                   r" already appeared at .*line 1"):
        load_instances(path)
    (tmp_path / "t.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(InvalidInstanceError, match=r"list of instances.*keys \['rows'\]"):
        load_instances(tmp_path / "t.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_instances(tmp_path / "missing.jsonl")


def test_unreachable_hub_dataset_says_how_to_use_a_local_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Offline and with an empty cache: fails at once instead of waiting on the network.
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    if "datasets" in sys.modules:  # the flags are read when datasets is imported
        import datasets

        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf", raising=False)
    with pytest.raises(MissingResourceError) as info:
        load_instances("agentgym-tests/SWE-bench_Nowhere", env_id="swe-lite")
    message = str(info.value)
    assert "'agentgym-tests/SWE-bench_Nowhere'" in message and "split 'test'" in message
    assert "the Hub cannot be reached (HF_HUB_OFFLINE is set)" in message
    assert "`agentgym eval swe-lite -e tasks=tasks.jsonl ...` on the command line" in message
    assert 'gym.make("swe-lite", tasks="tasks.jsonl") in Python' in message
    assert ".to_json('tasks.jsonl')" in message


def no_hub_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any use of the Hub client (its retries) fail the test."""
    import datasets

    def load_dataset(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Hub client was called: it retries for half a minute")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)


def no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """No offline mode, no proxy, and a Hub endpoint nothing listens on (refused)."""
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy",
                 "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")


def test_an_unreachable_hub_is_found_at_once_without_the_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    no_hub_client(monkeypatch)
    no_connection(monkeypatch)
    with pytest.raises(MissingResourceError, match=r"no connection to 127\.0\.0\.1:9"):
        load_instances("agentgym-tests/SWE-bench_Nowhere")


def test_without_a_connection_a_hub_dataset_is_read_from_the_hub_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    no_hub_client(monkeypatch)
    no_connection(monkeypatch)
    # The Hub cache's layout: refs/main names the snapshot the files are in.
    repo = tmp_path / "datasets--agentgym-tests--SWE-bench_Cached"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    data = repo / "snapshots" / ("0" * 40) / "data"
    data.mkdir(parents=True)
    (data / "test-00000-of-00001.jsonl").write_text(json.dumps(row()) + "\n")
    (data / "train-00000-of-00001.jsonl").write_text(
        json.dumps(row(instance_id="django__django-1")) + "\n")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    [instance] = load_instances("agentgym-tests/SWE-bench_Cached")
    assert instance.instance_id == "django__django-11099"


# --- image_name --------------------------------------------------------------------------


def test_image_name_follows_the_official_harness() -> None:
    assert image_name("django__django-11099") == (
        "swebench/sweb.eval.x86_64.django_1776_django-11099:latest")
    assert image_name("Pylint-dev__pylint-7080") == (
        "swebench/sweb.eval.x86_64.pylint-dev_1776_pylint-7080:latest")
    assert image_name("sympy__sympy-20590", arch="arm64", tag="v1") == (
        "swebench/sweb.eval.arm64.sympy_1776_sympy-20590:v1")


# --- patches -----------------------------------------------------------------------------

GIT_PATCH = '''\
From 1234 Mon Sep 17 00:00:00 2001
Subject: [PATCH] fix

diff --git a/src/pkg/core.py b/src/pkg/core.py
index 83db48f..bf269f4 100644
--- a/src/pkg/core.py
+++ b/src/pkg/core.py
@@ -1,4 +1,3 @@
 def f():
---- a comment that looks like a header
-+++ another
+    return 1
 x = 1
diff --git a/new_file.py b/new_file.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/new_file.py
@@ -0,0 +1 @@
+print("hi")
\\ No newline at end of file
diff --git a/old.py b/old.py
deleted file mode 100644
index e69de29..0000000
--- a/old.py
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/docs/a b.txt b/docs/a b.txt
index 1..2 100644
--- a/docs/a b.txt\t
+++ b/docs/a b.txt\t
@@ -1 +1 @@
-a
+b
diff --git a/pkg/before.py b/pkg/after.py
similarity index 100%
rename from pkg/before.py
rename to pkg/after.py
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..c0ffee0
Binary files /dev/null and b/logo.png differ
diff --git "a/t\\303\\251st.py" "b/t\\303\\251st.py"
index 1..2 100644
--- "a/t\\303\\251st.py"
+++ "b/t\\303\\251st.py"
@@ -1 +1 @@
-a
+b
'''


def test_patch_files_reads_every_kind_of_git_section() -> None:
    assert patch_files(GIT_PATCH) == [
        "src/pkg/core.py", "new_file.py", "old.py", "docs/a b.txt", "pkg/before.py",
        "pkg/after.py", "logo.png", "tést.py"]


def test_split_patch_keeps_each_part_whole() -> None:
    parts = split_patch(GIT_PATCH)
    assert [(p.old_path, p.new_path) for p in parts[:4]] == [
        ("src/pkg/core.py", "src/pkg/core.py"), (None, "new_file.py"), ("old.py", None),
        ("docs/a b.txt", "docs/a b.txt")]
    # The hunk's "---- a comment" line stays in the first part instead of opening a file.
    assert "---- a comment" in parts[0].text and parts[0].text.count("diff --git") == 1
    assert "No newline" in parts[1].text
    body = GIT_PATCH[GIT_PATCH.index("diff --git"):]
    assert "".join(p.text for p in parts) == body


def test_a_miscounted_hunk_ends_at_the_next_header() -> None:
    patch = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,5 +1,5 @@\n-x\n+y\n"
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-x\n+y\n")
    assert patch_files(patch) == ["a.py", "b.py"] and len(split_patch(patch)) == 2


def test_patch_files_reads_plain_diff_u() -> None:
    plain = (
        "--- orig/lib/a.py\t2024-01-01 10:00:00.000000000 +0000\n"
        "+++ fixed/lib/a.py\t2024-01-02 10:00:00.000000000 +0000\n"
        "@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n y = 3\n"
        "--- /dev/null\n+++ fixed/lib/b.py\n@@ -0,0 +1 @@\n+z = 1\n"
    )
    assert patch_files(plain) == ["lib/a.py", "lib/b.py"]
    assert [p.old_path for p in split_patch(plain)] == ["lib/a.py", None]
    assert patch_files("") == [] and patch_files("no diff here\n") == []


def test_patch_files_agrees_with_git(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "a.py").write_text("one\n")
    (tmp_path / "b.py").write_text("".join(f"line {i}\n" for i in range(20)))
    (tmp_path / "gone.py").write_text("x\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (tmp_path / "a.py").write_text("two\n-- sql\n")
    (tmp_path / "b.py").rename(tmp_path / "c.py")
    (tmp_path / "gone.py").unlink()
    (tmp_path / "dir with space").mkdir()
    (tmp_path / "dir with space" / "n.py").write_text("n\n")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    git("add", "-A")
    diff = git("diff", "--cached", "--binary", "-M", "HEAD")
    assert "rename from b.py" in diff
    assert sorted(patch_files(diff)) == sorted(
        ["a.py", "b.py", "c.py", "gone.py", "dir with space/n.py", "blob.bin"])


@pytest.mark.parametrize(("path", "expected"), [
    ("tests/test_a.py", True), ("pkg/tests/helpers.py", True), ("test/data/x.json", True),
    ("sympy/core/tests/test_basic.py", True), ("testing/python/collect.py", True),
    ("conftest.py", True), ("src/pkg/conftest.py", True), ("test_x.py", True),
    ("pkg/thing_test.py", True), ("pkg/thing_tests.py", True), ("app/tests.py", True),
    ("pytest.ini", True),
    ("src/pkg/core.py", False), ("src/_pytest/python.py", False), ("pkg/testutils.py", False),
    ("setup.cfg", False), ("attestation.py", False), ("docs/testing.rst", False), ("", False),
])
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected
