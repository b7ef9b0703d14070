"""The MCP face: `buzz mcp` serves the workspace client API to an MCP client (agents.md §7)."""
