"""agentgym's local web sites, each a :class:`~agentgym.plugins.web.sites.framework.Site`
over SQLite served on 127.0.0.1 (see :mod:`agentgym.plugins.web.sites.framework`)."""
