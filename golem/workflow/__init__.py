"""The workflows behind the commands: fix (baseline, agent, verdict), run, verify, undo."""
