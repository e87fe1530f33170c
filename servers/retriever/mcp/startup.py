"""A server over stdio that cannot start still answers its client: each request (the client's
`initialize` first) gets a JSON-RPC error carrying the reason, so the client shows the configuration
problem instead of "Connection closed" (the reason is on stderr as well)."""

from __future__ import annotations

import json
import sys
from typing import Any

INTERNAL_ERROR = -32603  # JSON-RPC's code for a failure on the server's side


def refuse_requests(message: str) -> None:
    """Answer every request on stdin (the client's `initialize` first) with `message` as the error,
    until the client closes stdin: exiting at once would race the reply, and the client would
    report the closed pipe instead. Returns at once when stdin is a terminal (a person reads stderr)."""
    if sys.stdin.isatty():
        return
    for line in sys.stdin.buffer:
        request = _request(line)
        if request is not None and "id" in request:
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": INTERNAL_ERROR, "message": message}}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def _request(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:  # not JSON (or unreadable): not a request this can answer
        return None
    return message if isinstance(message, dict) and "method" in message else None
