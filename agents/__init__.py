"""The MCP door for agents: Flywheel's tools over the Model Context Protocol."""
