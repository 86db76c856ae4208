"""The terminal plugin (its issue fills it in)."""
