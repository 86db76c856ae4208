"""Task folders under data/ hold their own tests (a Terminal-Bench task's test_outputs.py),
run by the task's grader inside a sandbox, never by this suite."""

collect_ignore_glob = ["data/*"]
