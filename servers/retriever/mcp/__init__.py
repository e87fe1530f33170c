"""The MCP face: the registry's tools of one profile (api/registry.py), one error middleware that
also hides the tools the loaded configuration cannot serve, and instructions that match the
server's state. No retrieval logic lives here."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import package_version
from ..api.registry import instructions, selected
from .middleware import ToolErrors
from .tools import RetrieverMCP, register

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

def server_version() -> str:
    return package_version()


class _OneLine(logging.Filter):
    """FastMCP logs every failed call itself (a traceback for each, a client's mistake included);
    ToolErrors logs each once, as one line, with the traceback for our own bugs only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Error calling tool", "Invalid arguments for tool"))


def build_server(engine: Retriever, read_only: bool | None = None, ultrarag: bool = False,
                 profile: str | None = None, include: Iterable[str] | None = None,
                 exclude: Iterable[str] | None = None) -> RetrieverMCP:
    """The MCP server over `engine` with the tools of `profile` (default: tools.profile in the YAML;
    `ultrarag` implies the ultrarag profile), plus `include`, less `exclude`. `read_only`
    (default: security.read_only in the YAML) leaves out every tool that writes."""
    cfg = engine.base_config
    if read_only and not cfg.security.read_only:
        engine.serve_read_only()  # writes no file either (calibration.py), as the YAML's read_only
    read_only = cfg.security.read_only if read_only is None else read_only
    profile = profile or ("ultrarag" if ultrarag else cfg.tools.profile)
    tools = selected(profile, cfg.tools.include if include is None else include,
                     cfg.tools.exclude if exclude is None else exclude, read_only)
    fastmcp_log = logging.getLogger("fastmcp.server.server")
    if not any(isinstance(f, _OneLine) for f in fastmcp_log.filters):
        fastmcp_log.addFilter(_OneLine())
    server = RetrieverMCP("retriever", version=server_version(), middleware=[ToolErrors(engine, tools)],
                          instructions=instructions(engine, tools))
    server.engine = engine
    register(server, tools)
    return server


__all__ = ["build_server", "server_version"]
