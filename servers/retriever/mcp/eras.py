"""The stateless MCP revision (2026-07-28) beside the handshake ones, for the stdio server
(stdio.py): which revision a request names in its `_meta`, results stamped as that revision has
them, and the error for a revision this server does not speak. No MCP framework is imported."""

from __future__ import annotations

from typing import Any

MODERN = ("2026-07-28",)  # the stateless revisions: no handshake, server/discover, each request's _meta
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"  # the _meta key of a stateless request
UNSUPPORTED_PROTOCOL_VERSION = -32022


def modern_version(params: dict[str, Any]) -> str | None:
    """The protocol revision a stateless request names in its _meta (None: a handshake-era request)."""
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


CACHEABLE = {"tools/list", "resources/list", "resources/templates/list", "prompts/list", "server/discover"}


def stamped(result: dict[str, Any], method: str) -> dict[str, Any]:
    """A result as the stateless revision has it: `resultType`, and for lists and discover the
    cache directives (never cached: the tools a configuration serves can change)."""
    out = {**result, "resultType": "complete"}
    return {**out, "ttlMs": 0, "cacheScope": "private"} if method in CACHEABLE else out


def unsupported(rid: Any, version: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {
        "code": UNSUPPORTED_PROTOCOL_VERSION, "message": f"Unsupported protocol version: {version[:40]}",
        "data": {"supported": list(MODERN), "requested": version[:40]}}}
