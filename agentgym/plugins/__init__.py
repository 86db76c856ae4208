"""Built-in plugins. Each registers through its own entry point, like a third-party one."""
