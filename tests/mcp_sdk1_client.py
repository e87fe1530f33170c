"""The official MCP Python SDK 1.x's client, run by tests/test_client_matrix.py in its own venv
(.cache/mcp1-venv, `make mcp1-venv`: SDK 1.x cannot live beside 2.x in .venv). It imports nothing of
this project. Its one argument is a JSON plan:

    {"stdio": [command, arg, ...]} or {"url": "http://127.0.0.1:P/mcp", "token": "..."},
    "calls": [[tool, arguments], ...]

It connects, lists the tools, calls each in turn and prints one JSON line on stdout:
{"sdk": version, "protocol": negotiated revision, "tools": {name: outputSchema}, "calls":
[{"name", "is_error", "structured", "text"}, ...]}."""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


async def _session(session: ClientSession, calls: list[list[Any]]) -> dict[str, Any]:
    init = await session.initialize()
    tools = {t.name: t.outputSchema for t in (await session.list_tools()).tools}
    replies = []
    for name, arguments in calls:
        result = await session.call_tool(name, arguments)
        replies.append({"name": name, "is_error": result.isError, "structured": result.structuredContent,
                        "text": "".join(getattr(c, "text", "") for c in result.content)})
    return {"sdk": version("mcp"), "protocol": str(init.protocolVersion), "tools": tools, "calls": replies}


async def main(plan: dict[str, Any]) -> dict[str, Any]:
    if "stdio" in plan:
        command, *args = plan["stdio"]
        async with stdio_client(StdioServerParameters(command=command, args=args)) as (read, write):
            async with ClientSession(read, write) as session:
                return await _session(session, plan["calls"])
    headers = {"Authorization": f"Bearer {plan['token']}"}
    async with streamablehttp_client(plan["url"], headers=headers, timeout=120) as (read, write, _):
        async with ClientSession(read, write) as session:
            return await _session(session, plan["calls"])


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
