"""The MCP face: the registry's tools of one profile (api/registry.py) behind one gate that turns
every failure into a tool error and hides the tools the loaded configuration cannot serve
(core.py), and instructions that match the server's state. stdio is served by stdio.py without an
MCP framework (a fast start, a cheap call); streamable HTTP by FastMCP (server.py). No retrieval
logic lives here."""
