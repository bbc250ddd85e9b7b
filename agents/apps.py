from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """The MCP door (``manage.py runmcp``). It has no models; loading it imports no MCP
    code, so the web processes do not pay for the SDK (about 2.5 s to import)."""

    name = "agents"
    verbose_name = "Agents (MCP)"
