"""``python -m agentgym`` is the ``agentgym`` command."""

from agentgym.cli import main

main()
