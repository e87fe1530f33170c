"""What every tool call goes through: a worker thread that the request's cancellation stops, and
one middleware that turns every failure into a tool error with a message."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from pydantic import ValidationError

from ..api.models import argument_problems
from ..errors import CancelledWork, RetrieverError
from ..guard import FROM_CLIENT
from ..limits import CANCEL

if TYPE_CHECKING:
    from ..engine import Retriever

log = logging.getLogger("retriever.mcp")
T = TypeVar("T")


async def run(name: str, fn: Callable[..., T], /, *args: Any) -> T:
    """`fn(*args)` on a worker thread, as a client's call: paths, endpoints and settings are
    checked (guard.py), and if the request is cancelled (the client gave up or went away) the work
    stops at its next chunk of queries (limits.py) instead of running on unseen."""
    event = threading.Event()
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, event)
    ctx.run(FROM_CLIENT.set, True)

    def work() -> T:
        try:
            return fn(*args)
        except CancelledWork as e:
            log.info("%s: %s", name, e)
            raise

    future = asyncio.get_running_loop().run_in_executor(None, ctx.run, work)
    try:
        return await future
    except asyncio.CancelledError:
        event.set()
        log.info("%s: request cancelled; its remaining work is dropped", name)
        raise


class ToolErrors(Middleware):
    """Every failure of a tool call becomes a tool error with a message, in one place: our errors
    with theirs, wrong arguments with what is wrong, anything else as an internal error (logged
    with its traceback on stderr). Arguments over limits.max_request_bytes are refused first."""

    def __init__(self, engine: Retriever) -> None:
        self.engine = engine

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = context.message.name
        limit = self.engine.base_config.limits.max_request_bytes
        size = len(json.dumps(context.message.arguments or {}, default=str))
        if size > limit:
            raise ToolError(f"{name}: the arguments are {size} bytes, over limits.max_request_bytes ({limit})")
        try:
            return await call_next(context)
        except ToolError:
            raise
        except RetrieverError as e:
            log.error("%s: %s", name, e)
            raise ToolError(str(e)) from e
        except (ArgumentError, ValidationError, ValueError, TypeError) as e:
            raise ToolError(f"{name}: invalid arguments: {argument_problems(e)}") from e
        except Exception as e:
            log.exception("%s: unexpected error", name)
            raise ToolError(f"{name}: internal error ({type(e).__name__}); the server log has the details") from e
