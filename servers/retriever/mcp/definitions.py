"""Every registry tool as MCP's `tools/list` carries it (name, title, description, input and output
schemas, annotations), kept in tools.json beside this file so the stdio server lists its tools
without building schemas, or importing FastMCP, at start-up. The file is FastMCP's own listing of
the registry's tools, written by `python -m retriever.mcp.tools`; tests/test_schemas.py fails
when it no longer matches (a changed request model or description, another FastMCP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("tools.json")
HOW = "python -m retriever.mcp.tools"


def load() -> dict[str, dict[str, Any]]:
    """Each tool's definition by name, in the registry's order."""
    return json.loads(PATH.read_text(encoding="utf-8"))
