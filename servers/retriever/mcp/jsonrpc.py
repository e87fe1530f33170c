"""JSON-RPC 2.0 as the MCP servers here speak it without a framework (stdio.py, stdin.py, tasks.py,
middleware.py): the error codes, an error message, a valid request id."""

from __future__ import annotations

from typing import Any

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
RESOURCE_NOT_FOUND = -32002  # MCP's code for resources/read of an unknown URI


class ProtocolError(Exception):
    """A request answered with a JSON-RPC error of `code`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def valid_id(rid: Any) -> bool:
    """A request id as JSON-RPC has it here: a string or an integer (not a bool, not null)."""
    return isinstance(rid, str) or isinstance(rid, int) and not isinstance(rid, bool)


def error(rid: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error response to request `rid`."""
    body: dict[str, Any] = {"code": code, "message": message}
    return {"jsonrpc": "2.0", "id": rid, "error": {**body, "data": data} if data is not None else body}


__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "METHOD_NOT_FOUND", "PARSE_ERROR",
           "RESOURCE_NOT_FOUND", "ProtocolError", "error", "valid_id"]
