"""What both MCP transports share, without importing an MCP framework: the tools a server lists,
a call's function (its signature is its request model's, so the arguments validate as FastMCP
validates them), and the gate every call goes through (the tools the configuration hides, the
refusals before a call, the message of every failure). How a call then runs is serving.py's.

The streamable HTTP server is FastMCP's (server.py); stdio is served by stdio.py on this alone, so a
stdio start imports no MCP framework."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from ..api import grants
from ..api.models import Request, argument_problems, unreadable_json
from ..api.registry import listed_input, selected
from ..api.replies import reply
from ..api.tool import Tool
from ..errors import InvalidInputError, RetrieverError
from ..security.guard import for_client
from ..security.limits import Report
from ..security.principals import PRINCIPAL
from .serving import serve_call

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

log = logging.getLogger("retriever.mcp")
T = TypeVar("T")


class Refused(Exception):
    """A call refused or failed with a message for the client (MCP's tool error: isError true)."""


def served_tools(engine: Retriever, read_only: bool | None = None, ultrarag: bool = False, profile: str | None = None,
                 include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> list[Tool]:
    """The tools of `profile` (default: tools.profile in the YAML; `ultrarag` implies the ultrarag
    profile), plus `include`, less `exclude`. `read_only` (default: security.read_only in the YAML)
    leaves out every tool that writes, and makes the engine write no file either."""
    cfg = engine.base_config
    if read_only and not cfg.security.read_only:
        engine.serve_read_only()  # writes no file either (calibration.py), as the YAML's read_only
    read_only = cfg.security.read_only if read_only is None else read_only
    profile = profile or ("ultrarag" if ultrarag else cfg.tools.profile)
    return selected(profile, cfg.tools.include if include is None else include,
                    cfg.tools.exclude if exclude is None else exclude, read_only)


def tool_function(name: str, model: type[Request], serve: Callable[[Request], Awaitable[T]],
                  returns: Any = inspect.Signature.empty) -> Callable[..., Awaitable[T]]:
    """An async function whose keyword parameters are `model`'s fields (with their descriptions,
    defaults and ranges), so FastMCP's input schema is the model's. Its caller validates the arguments
    by that signature (FastMCP's adapter, or Gate.request's), the one validation of a call: the body
    builds the model from them without validating them again (Request.built, model_construct's result: each field's type,
    range and validators have run; `extra="forbid"` is the signature's refusal of an unknown
    argument), runs the model's one check across values (Request.check_finite) and serves it
    (tests/test_one_validation.py: it equals the model's own validation). No docstring: the
    description is given to FastMCP as such (server.py), which otherwise imports griffe and parses
    every docstring at start-up (0.03-0.13 s of build_server here).
    `returns`: the return annotation (FastMCP reads it)."""
    fields = sorted(model.model_fields.items(), key=lambda item: not item[1].is_required())
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[f.annotation, f],
                                default=inspect.Parameter.empty if f.is_required() else f.default)
              for n, f in fields]

    async def tool(**arguments: Any) -> T:
        return await serve(model.built(**arguments).check_finite())

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params}
    if returns is not inspect.Signature.empty:
        tool.__annotations__["return"] = returns
    return tool


def _done(work: Awaitable[T]) -> T:
    """The value of a coroutine that completes without waiting on anything (the tool function's body
    around `validated`: the request built and returned), run to its end here."""
    coro = work.__await__()
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    coro.close()
    raise RuntimeError("a validation waited on something")


class Gate:
    """Every call of a server goes through here. A client's mistake (wrong arguments, our errors: a
    missing index, a path outside the roots, ...) is told to the client and logged as one line;
    anything else is our bug: an internal error, logged with its traceback. Arguments over
    limits.max_request_bytes are refused first. A tool the loaded configuration cannot serve (a web
    tool without a key, ...) is not listed (`hidden`)."""

    def __init__(self, engine: Retriever, tools: Sequence[Tool]) -> None:
        self.engine = engine
        self.tools = {t.name: t for t in tools}
        self._hidden: tuple[object, set[str]] = (None, set())
        self._validators: dict[str, TypeAdapter[Any]] = {}

    async def request(self, tool: Tool, arguments: dict[str, Any]) -> Request:
        """`request_now`, awaitable."""
        return self.request_now(tool, arguments)

    def request_now(self, tool: Tool, arguments: dict[str, Any]) -> Request:
        """The tool's arguments checked as FastMCP checks them (the same signature, tool_function)
        into its request: the call's one validation. A write whose arguments do not validate is audited."""
        if tool.name not in self._validators:
            async def validated(request: Request) -> Request:
                return request

            self._validators[tool.name] = TypeAdapter(tool_function(tool.name, tool.request, validated))  # type: ignore[arg-type]
        try:
            return _done(self._validators[tool.name].validate_python(arguments))
        except (ValidationError, InvalidInputError):  # the signature's refusal, or NaN (Request.check_finite)
            self.invalid(tool.name, arguments)
            raise

    def invalid(self, name: str, arguments: Any) -> None:
        """The audit line of a call of `name` refused because its arguments do not validate (a write only:
        grants.audit), its collections read from the raw arguments as a call refused for its scope."""
        tool = self.tools.get(name)
        if tool is not None:
            grants.audit(PRINCIPAL.get(), tool, self.engine, arguments if isinstance(arguments, dict) else {},
                         "invalid arguments")

    async def call_result(self, name: str, arguments: dict[str, Any], progress: Report | None = None
                          ) -> dict[str, Any]:
        """One call's CallToolResult as the wire has it, made as both servers make a plain call's: the
        refusals, the arguments validated, serve_call, a failure as a tool error (a task's outcome:
        tasks.py)."""
        why = self.refusal(name, arguments)
        if why is not None:
            return tool_result(why, True)
        tool = self.tools[name]  # the refusal named any other
        try:
            payload = await serve_call(self.engine, tool, await self.request(tool, arguments), progress=progress)
        except Exception as e:
            return tool_result(self.failure(name, e), True)
        text, structured = reply(payload, tool.output_schema is not None)
        return tool_result(text, structured=structured)

    def withheld(self) -> set[str]:
        """The tools tools/list leaves out for this request: those hidden by the configuration, and
        those the caller may not call: outside its scopes, or refused to it under security.visibility
        (api/grants.py listed)."""
        return self.hidden() | (set(self.tools) - grants.listed(PRINCIPAL.get(), self.tools.values(), self.engine))

    def hidden(self) -> set[str]:
        """The tools the loaded configuration cannot serve, worked out once per configuration
        (a new one comes only with retriever_init), not twice on every call."""
        cfg = self.engine.config
        if self._hidden[0] is not cfg:
            self._hidden = (cfg, {name for name, t in self.tools.items() if t.unavailable(self.engine) is not None})
        return self._hidden[1]

    def listed(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The input schema of `name` as listed with the loaded configuration (registry.listed_input)."""
        return listed_input(self.engine, name, schema)

    def refusal(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why a call of `name` with `arguments` is refused before it runs (None: it may run). A write
        refused for the caller's scope is audited here (its grants are checked, and audited, in serve_call)."""
        limit = self.engine.base_config.limits.max_request_bytes
        try:
            size = len(json.dumps(arguments, default=str))
        except (ValueError, RecursionError) as e:  # an integer over 4,300 digits, nesting past the recursion limit
            log.info("%s: unreadable arguments: %s", name, unreadable_json(e))
            self.invalid(name, arguments)
            return f"{name}: invalid arguments: {unreadable_json(e)}"
        if size > limit:
            return f"{name}: the arguments are {size} bytes, over limits.max_request_bytes ({limit})"
        tool = self.tools.get(name)
        if tool is None:
            log.info("%s: no such tool here", name)
            return (f"no tool {name!r} on this server (its profile, read-only mode or tools.exclude leave it out); "
                    f"its tools: {', '.join(self.tools) or 'none'}")
        why = tool.unavailable(self.engine)
        if why is not None:
            log.info("%s: refused: needs %s", name, why)
            return f"{name} cannot work with this server's configuration: it needs {why}"
        refused = self.scope_refusal(name, arguments)
        return None if refused is None else refused[1]

    def scope_refusal(self, name: str, arguments: Any) -> tuple[str, str] | None:
        """(the scope it needs, why) where the caller's scopes do not reach the tool `name` that this server
        serves and can serve (None: they do, or the gate refuses the call for another reason first). Such a
        write is audited here, its collections read from the raw `arguments` (grants.named_in). MCP over HTTP
        answers it with 403 before the call reaches FastMCP (middleware.ScopeChallenge); the other transports
        with a tool error (refusal)."""
        tool = self.tools.get(name)
        if tool is None or name in self.hidden():
            return None
        principal = PRINCIPAL.get()
        why = grants.scope_refusal(principal, tool)
        if why is None:
            return None
        log.info("%s: refused: %s", name, why)
        grants.audit(principal, tool, self.engine, arguments if isinstance(arguments, dict) else {}, "refused")
        return tool.scope, why

    def failure(self, name: str, e: BaseException, arguments_error: tuple[type[BaseException], ...] = ()) -> str:
        """The message for the client of what a call raised; logged once. `arguments_error`: the
        framework's own exception for arguments that do not validate, if it has one."""
        if isinstance(e, (Refused, RetrieverError)):
            log.info("%s: %s", name, " ".join(str(e).split())[:500])
            return for_client(str(e), self.engine.config, self.engine.base_dir)  # paths relative to the YAML's folder
        if isinstance(e, (ValidationError, *arguments_error)):
            problems = argument_problems(e)  # type: ignore[arg-type]
            log.info("%s: invalid arguments: %s", name, problems)
            return f"{name}: invalid arguments: {problems}"
        log.error("%s: internal error", name, exc_info=e)
        return f"{name}: internal error ({type(e).__name__}); this is a bug in the server, whose log has the details"


def tool_result(text: str, error: bool = False, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    """MCP's tool result: the JSON (or the message) as text, and structured content where given."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


__all__ = ["Gate", "Refused", "served_tools", "tool_function", "tool_result"]
