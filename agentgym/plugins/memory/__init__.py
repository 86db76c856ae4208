"""The memory plugin (its issue fills it in)."""
