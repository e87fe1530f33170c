"""FastMCP's side of the gate (core.py): one middleware that turns every failure of a call into a
tool error with a message, and hides the tools the loaded configuration cannot serve (and, in a
`mode`, the kinds it cannot answer: registry.listed_input)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from mcp.types import ToolListChangedNotification

from ..api.tool import Tool
from .core import Gate, Refused

if TYPE_CHECKING:
    from ..engine.retriever import Retriever


class ToolErrors(Middleware):
    """Every failure of a tool call becomes a tool error with a message, in one place (core.Gate).
    A tool the loaded configuration cannot serve (a web tool without a key, ...) is not listed;
    when a call changes that (retriever_init), the client is told the list changed."""

    def __init__(self, engine: Retriever, tools: Sequence[Tool] = ()) -> None:
        self.gate = Gate(engine, tools)

    async def on_list_tools(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        hidden = self.gate.hidden()
        return [t.model_copy(update={"parameters": self.gate.listed(t.name, t.parameters)})
                for t in await call_next(context) if t.name not in hidden]

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = context.message.name
        why = self.gate.refusal(name, context.message.arguments or {})
        if why is not None:
            raise ToolError(why)
        before = self.gate.hidden()
        try:
            return await call_next(context)
        except Exception as raised:
            # FastMCP wraps what a tool raises in a ToolError (`from` it): judge by that cause
            e = raised.__cause__ if isinstance(raised, ToolError) and raised.__cause__ is not None else raised
            told = self.gate.failure(name, Refused(str(e)) if isinstance(e, ToolError) else e, (ArgumentError,))
            raise ToolError(told) from (None if isinstance(e, ToolError) else e)
        finally:
            if self.gate.hidden() != before and context.fastmcp_context is not None:
                await context.fastmcp_context.send_notification(ToolListChangedNotification())
