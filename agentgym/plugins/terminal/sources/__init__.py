"""Terminal tasks generated at run time from benchmarks that installed packages ship.

Each module here reads one benchmark's data from its installed package (never a copy in
this repository) and writes Harbor task folders: :mod:`.agentbench` (AgentBench OS, from
``inspect-evals``) and :mod:`.nl2bash` (NL2Bash / InterCode-ALFA, from ``icalfa``). Both
expose ``materialize(dest, split)``, which returns the folders written and the ids left
out, each with the reason.
"""
