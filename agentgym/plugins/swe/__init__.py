"""The swe plugin (its issue fills it in)."""
