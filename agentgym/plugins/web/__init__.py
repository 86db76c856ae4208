"""The web plugin (its issue fills it in)."""
