"""What every tool call goes through: a worker thread that the request's cancellation stops, and
one middleware that turns every failure into a tool error with a message."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from mcp.types import ToolListChangedNotification
from pydantic import ValidationError

from ..api.models import argument_problems, unreadable_json
from ..api.tool import Tool
from ..errors import CancelledWork, RetrieverError
from ..security.guard import FROM_CLIENT, for_client
from ..security.limits import CANCEL

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

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
    """Every failure of a tool call becomes a tool error with a message, in one place. A client's
    mistake (wrong arguments, our errors: a missing index, a path outside the roots, ...) is told to
    the client and logged as one line; anything else is our bug: an internal error, logged with its
    traceback. Arguments over limits.max_request_bytes are refused first. A tool the loaded
    configuration cannot serve (a web tool without a key, ...) is not listed; when a call changes
    that (retriever_init), the client is told the list changed."""

    def __init__(self, engine: Retriever, tools: Sequence[Tool] = ()) -> None:
        self.engine = engine
        self.tools = {t.name: t for t in tools}
        self._hidden: tuple[object, set[str]] = (None, set())

    def _shown(self, e: Exception) -> str:
        """The error's message for the client: paths relative to the YAML's folder (the log keeps them whole)."""
        return for_client(str(e), self.engine.config, self.engine.base_dir)

    def hidden(self) -> set[str]:
        """The tools the loaded configuration cannot serve, worked out once per configuration
        (a new one comes only with retriever_init), not twice on every call."""
        cfg = self.engine.config
        if self._hidden[0] is not cfg:
            self._hidden = (cfg, {name for name, t in self.tools.items() if t.unavailable(self.engine) is not None})
        return self._hidden[1]

    async def on_list_tools(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        hidden = self.hidden()
        return [t for t in await call_next(context) if t.name not in hidden]

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = context.message.name
        limit = self.engine.base_config.limits.max_request_bytes
        size = _size(name, context.message.arguments or {})
        if size > limit:
            raise ToolError(f"{name}: the arguments are {size} bytes, over limits.max_request_bytes ({limit})")
        tool = self.tools.get(name)
        if tool is None and self.tools:
            log.info("%s: no such tool here", name)
            raise ToolError(f"no tool {name!r} on this server (its profile, read-only mode or tools.exclude leave it "
                            f"out); its tools: {', '.join(self.tools)}")
        why = tool.unavailable(self.engine) if tool is not None else None
        if why is not None:
            log.info("%s: refused: needs %s", name, why)
            raise ToolError(f"{name} cannot work with this server's configuration: it needs {why}")
        before = self.hidden()
        try:
            return await call_next(context)
        except Exception as raised:
            # FastMCP wraps what a tool raises in a ToolError (`from` it): judge by that cause
            e = raised.__cause__ if isinstance(raised, ToolError) and raised.__cause__ is not None else raised
            if isinstance(e, ToolError):
                log.info("%s: %s", name, _one_line(e))
                raise ToolError(self._shown(e)) from None
            if isinstance(e, RetrieverError):
                log.info("%s: %s", name, _one_line(e))
                raise ToolError(self._shown(e)) from e
            if isinstance(e, (ArgumentError, ValidationError)):
                problems = argument_problems(e)
                log.info("%s: invalid arguments: %s", name, problems)
                raise ToolError(f"{name}: invalid arguments: {problems}") from e
            log.error("%s: internal error", name, exc_info=e)
            raise ToolError(f"{name}: internal error ({type(e).__name__}); this is a bug in the server, whose log "
                            "has the details") from e
        finally:
            if self.hidden() != before and context.fastmcp_context is not None:
                await context.fastmcp_context.send_notification(ToolListChangedNotification())


def _size(name: str, arguments: dict[str, Any]) -> int:
    """The arguments' size as JSON; ones JSON cannot carry (an integer over Python's 4,300 digits,
    nesting past the recursion limit) are the client's mistake, named."""
    try:
        return len(json.dumps(arguments, default=str))
    except (ValueError, RecursionError) as e:
        log.info("%s: unreadable arguments: %s", name, unreadable_json(e))
        raise ToolError(f"{name}: invalid arguments: {unreadable_json(e)}") from None


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())[:500]
