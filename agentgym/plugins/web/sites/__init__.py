"""agentgym's local web sites, each a :class:`~agentgym.plugins.web.sites.site.Site` over
SQLite with Jinja2 templates (:mod:`agentgym.plugins.web.sites.site`), served on 127.0.0.1 as
a Starlette app with a database per episode (:mod:`agentgym.plugins.web.sites.server`)."""
