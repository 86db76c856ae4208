"""``agentgym view``: trajectories in a local web page.

:mod:`agentgym.viewer.index` indexes JSONL trajectory files (one small row per episode,
the episode read on demand, appended lines picked up as they come);
:mod:`agentgym.viewer.server` is the page and its JSON API, a Starlette app served on
127.0.0.1 (:class:`agentgym.core.serving.LocalServer`).
"""
