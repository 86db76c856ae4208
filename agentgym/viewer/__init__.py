"""``agentgym view``: trajectories in a local web page.

:mod:`agentgym.viewer.index` indexes JSONL trajectory files (one small row per episode,
the episode read on demand, appended lines picked up as they come);
:mod:`agentgym.viewer.server` serves the page and its JSON API on 127.0.0.1.
"""
