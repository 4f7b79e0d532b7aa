"""Agent access: an MCP server over a study store (tools in `tools`, store access in `access`, SQL in `sql`)."""
