"""MCP over stdio on core.py alone: newline-delimited JSON-RPC 2.0, the `initialize` handshake
(protocol revisions 2024-11-05 to 2025-11-25) and the stateless 2026-07-28 (`server/discover`, each
request's `_meta` naming its revision, results with `resultType`), `tools/list` from tools.json (definitions.py) and
`tools/call` through the same gate, worker threads and replies as the FastMCP server. Importing no
MCP framework halves the time to the first answer and the cost of a call (bench/LEAN.md).

What it speaks: `initialize`, `ping`, `tools/list`, `tools/call` (each on its own task, so calls
overlap; a call given a `progressToken` gets `notifications/progress` from its long work),
`notifications/cancelled` (the call's work stops, no answer is sent, as MCP says),
`notifications/tools/list_changed` when a call changes which tools the configuration can serve, and
on 2025-11-25 MCP tasks (tasks.py: a long tool's call with `task`, tasks/get, /result, /cancel, /list), on
2026-07-28 the tasks extension (a long tool's call from a client that declares it; tasks/get, /update, /cancel).
It has no prompts (their list answers empty) and asks the client nothing. A client that opens
with `server/discover` (the MCP SDK 2.x) speaks 2026-07-28 with it; one that opens with
`initialize`, the revision it asks for.

The protocol owns file descriptor 1: the server keeps its own copy of it and points fd 1 and
`sys.stdout` at stderr, so a stray print, ours or a native library's, cannot corrupt it. The client's
messages are read off stdin by stdin.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from .. import package_version
from ..api import resources
from ..api.registry import instructions
from ..api.replies import json_bytes, reply, reply_bytes
from ..api.request import Request
from ..api.tool import Tool
from ..errors import RetrieverError
from ..security.limits import cancelled
from . import definitions, tasks
from .core import Gate
from .core import tool_result as _tool_result
from .eras import MODERN, modern_version, stamped, unsupported
from .jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    ProtocolError,
    error,
    valid_id,
)
from .serving import serve_call, serve_here
from .stdin import Lines as Lines  # re-exported (bench/call_spans.py marks its feed)
from .stdin import read_on_loop, read_on_thread

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

log = logging.getLogger("retriever.mcp")
Prepared = tuple[Tool, Request]  # a call's tool and its request, checked and validated (StdioServer.prepare)

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # the initialize handshake's revisions
EMPTY = {"resources/list": "resources", "resources/templates/list": "resourceTemplates", "prompts/list": "prompts"}


class StdioServer:
    """One client on a pair of byte streams."""

    def __init__(self, engine: Retriever, tools: Sequence[Tool], out: IO[bytes]) -> None:
        self.engine = engine
        self.gate = Gate(engine, tools)
        self.out = out
        known = definitions.load()
        missing = [t.name for t in tools if t.name not in known]
        if missing:  # a tool added to the registry without its definition written
            raise RuntimeError(f"tools.json has no definition of {', '.join(missing)}: run `{definitions.HOW}`")
        self.definitions = {t.name: known[t.name] for t in tools}
        self.running: dict[Any, asyncio.Task[None]] = {}
        self.tasks = tasks.Tasks()  # MCP tasks (tasks.py), where the client speaks a revision that has them
        self.version: str | None = None  # the revision the initialize handshake agreed
        self.closed = False
        self.writing = threading.Lock()  # a call's thread writes its answer itself (answered)
        self.ended: asyncio.Future[None]  # set by `serve`'s caller: resolved when stdin ends (take)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message (from the event loop, or from the thread a call ran on)."""
        self.write(json_bytes(message) + b"\n")

    def write(self, text: bytes) -> None:
        """Write one message's line, already JSON (from the event loop, or a call's thread)."""
        if self.closed:
            return
        with self.writing:
            try:
                self.out.write(text)
                self.out.flush()
            except (OSError, ValueError):  # the client closed its end (or we did, at its end): nothing reaches it
                self.closed = True

    async def handle(self, line: bytes) -> None:
        """`dispatch(line)`, awaitable."""
        self.dispatch(line)

    def take(self, line: bytes | None) -> None:
        """A line as the reader gets it off stdin (None: stdin ended), dispatched right there on the event
        loop: a message goes on without waking a reading coroutine first (a hand-off less per call)."""
        if line is None or self.closed:
            if not self.ended.done():
                self.ended.set_result(None)
            return
        if line.strip():
            try:
                self.dispatch(line)
            except Exception:  # our bug: logged, and the server goes on with the next message
                log.exception("stdio: a message could not be handled")

    def dispatch(self, line: bytes) -> None:
        """One line from the client: a request (answered, tools/call on its own task), a
        notification, or a response (ignored: this server sends no request)."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past Python's recursion limit
            self.send(error(None, PARSE_ERROR, "Parse error: each line must be one JSON-RPC message"))
            return
        if not isinstance(message, dict):
            self.send(error(None, INVALID_REQUEST, "Invalid request: a JSON-RPC message is an object (no batches)"))
            return
        method, params, rid = message.get("method"), message.get("params"), message.get("id")
        params = {} if params is None else params
        if "id" in message and not valid_id(rid):
            self.send(error(None, INVALID_REQUEST, "Invalid request: an id is a string or an integer"))
            return
        if method is None and ("result" in message or "error" in message):
            return  # a response to a request this server never sent
        if not isinstance(method, str):
            if "id" in message:
                self.send(error(rid, INVALID_REQUEST, "Invalid request: method is a string"))
            return
        if "id" not in message:
            if method == "notifications/cancelled" and isinstance(params, dict) and valid_id(params.get("requestId")):
                task = self.running.get(params["requestId"])
                if task is not None:
                    task.cancel()
            return
        try:
            if not isinstance(params, dict):
                raise ProtocolError(INVALID_PARAMS, "Invalid params: params is an object")
            modern = modern_version(params)
            if modern is not None and modern not in MODERN:
                self.send(unsupported(rid, modern))
                return
            tasking = modern is None and self.version in tasks.VERSIONS
            if method == "tools/call" and (params.get("task") is not None if tasking else
                                           modern is not None and tasks.as_task(self.gate.tools, params)):
                self._start_task(rid, params, modern is not None)
                return
            if method == "tools/call":
                self._start(rid, params, modern is not None)
                return
            if method in tasks.METHODS and tasking or modern is not None and method.startswith("tasks/"):
                self._answer_task(rid, method, params, modern is not None)
                return
            result = self.answer(method, params)
            self.send({"jsonrpc": "2.0", "id": rid, "result": stamped(result, method) if modern else result})
        except ProtocolError as e:
            self.send(error(rid, e.code, str(e)))

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "server/discover":  # the stateless revision's handshake-free description
            return {"supportedVersions": list(MODERN),
                    "capabilities": {**self.capabilities(), "extensions": {tasks.EXTENSION: {}}},
                    "instructions": instructions(self.engine, self.gate.tools.values()),
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "retriever",
                                                                     "version": package_version()}}}
        if method == "initialize":
            asked = params.get("protocolVersion")
            self.version = asked if asked in VERSIONS else VERSIONS[-1]
            return {"protocolVersion": self.version,
                    "capabilities": {**self.capabilities(),
                                     **({"tasks": tasks.CAPABILITY} if self.version in tasks.VERSIONS else {})},
                    "serverInfo": {"name": "retriever", "version": package_version()},
                    "instructions": instructions(self.engine, self.gate.tools.values())}
        if method == "tools/list":
            hidden = self.gate.withheld()
            # `execution` (taskSupport) only where the revision has tasks; FastMCP's listing does the same
            plain = modern_version(params) is not None or self.version not in tasks.VERSIONS
            return {"tools": [{**{k: v for k, v in d.items() if not (plain and k == "execution")},
                               "inputSchema": self.gate.listed(name, d["inputSchema"])}
                              for name, d in self.definitions.items() if name not in hidden]}
        if method in ("ping", "logging/setLevel"):
            return {}
        if method == "resources/templates/list" and resources.served(self.gate.tools):
            return {"resourceTemplates": [resources.TEMPLATE] if resources.refusal(self.engine) is None else []}
        if method == "resources/read" and resources.served(self.gate.tools):
            return self.read_resource(params)
        if method in EMPTY:
            return {EMPTY[method]: []}
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def capabilities(self) -> dict[str, Any]:
        return {"tools": {"listChanged": True}, **({"resources": {}} if resources.served(self.gate.tools) else {})}

    def read_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        address = params.get("uri")
        if not isinstance(address, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: uri is a string")
        try:
            out = resources.read(self.engine, resources.doc_id(address))
        except RetrieverError as e:
            raise ProtocolError(INVALID_PARAMS, str(e)) from None
        if out is None:
            raise ProtocolError(RESOURCE_NOT_FOUND, f"Resource not found: {address[:200]}")
        return {"contents": [out]}

    def _start(self, rid: Any, params: dict[str, Any], modern: bool = False) -> None:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: tools/call takes a name (a string) and arguments "
                                                "(an object)")
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        token = token if valid_id(token) else None
        prepared = None
        if not modern and token is None and name in self.gate.tools and self.gate.tools[name].compute:
            prepared = self.now(rid, name, arguments)
            if prepared is None:
                return
        self._track(rid, self.call(rid, name, arguments, token, modern, prepared))

    def now(self, rid: Any, name: str, arguments: dict[str, Any]) -> Prepared | None:
        """A search call served as its line arrives (serving.serve_here: a quick one, the compute thread
        idle), or its refusal or failure answered: None. Else its tool and request, checked and
        validated once, for the task that serves it (`call`)."""
        with self.watching():
            prepared = self.prepare(name, arguments)
            if isinstance(prepared, dict):
                self.send({"jsonrpc": "2.0", "id": rid, "result": prepared})
                return None
            tool, request = prepared
            try:
                if not serve_here(self.engine, tool, request, lambda payload: self.answered(rid, tool, payload)):
                    return prepared
            except Exception as e:
                self.send({"jsonrpc": "2.0", "id": rid, "result": _tool_result(self.gate.failure(name, e), True)})
            return None

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """notifications/tools/list_changed after a call that changed the tools the configuration
        serves (retriever_init with another configuration)."""
        before = self.gate.hidden()
        try:
            yield
        finally:
            if self.gate.hidden() != before:
                self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def prepare(self, name: str, arguments: dict[str, Any]) -> Prepared | dict[str, Any]:
        """The call's tool and its request (the gate's checks passed, the arguments validated), or MCP's
        tool result of its refusal or invalid arguments (a tool error)."""
        why = self.gate.refusal(name, arguments)
        if why is not None:
            return _tool_result(why, True)
        tool = self.gate.tools[name]  # the gate refused any other name
        try:
            return tool, self.gate.request_now(tool, arguments)
        except Exception as e:
            return _tool_result(self.gate.failure(name, e), True)

    def _track(self, rid: Any, work: Coroutine[Any, Any, None]) -> None:
        """Serve request `rid` on a task of its own, which notifications/cancelled cancels."""
        task = asyncio.get_running_loop().create_task(work)
        self.running[rid] = task
        task.add_done_callback(lambda done: self.running.pop(rid) if self.running.get(rid) is done else None)

    def _start_task(self, rid: Any, params: dict[str, Any], extension: bool = False) -> None:
        """A tools/call to run as a task (2025-11-25: the client asked; `extension`, 2026-07-28's tasks
        extension: the client allowed it, the tool runs long): the task at once, the call on in the
        background. The extension has no progress on tasks: a progressToken there gets none."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) and not extension else None
        told = self.progress(token) if isinstance(token, str | int) and valid_id(token) else None
        try:
            self.send({"jsonrpc": "2.0", "id": rid, "result": self.tasks.start("", self.gate, params, told, extension)})
        except tasks.TaskError as e:
            self.send(error(rid, e.code, str(e), e.data))

    def _answer_task(self, rid: Any, method: str, params: dict[str, Any], extension: bool = False) -> None:
        """tasks/get, /result (which waits for the task's end), /cancel, /list, on a task of their own;
        `extension`: the tasks extension's tasks/get, /update, /cancel, for a client that declared it."""
        async def answer() -> None:
            try:
                if extension and method in tasks.EXTENSION_METHODS and not tasks.declared(params):
                    raise tasks.undeclared(method)
                result = await self.tasks.answer("", method, params, extension)
                self.send({"jsonrpc": "2.0", "id": rid, "result": result})
            except tasks.TaskError as e:
                self.send(error(rid, e.code, str(e), e.data))

        self._track(rid, answer())

    async def call(self, rid: Any, name: str, arguments: dict[str, Any], token: str | int | None = None,
                   modern: bool = False, prepared: Prepared | None = None) -> None:
        with self.watching(), contextlib.suppress(asyncio.CancelledError):  # cancelled: the client expects no answer
            refused = await self.result(rid, name, arguments, token, modern, prepared)
            if refused is not None:
                self.send({"jsonrpc": "2.0", "id": rid, "result": stamped(refused, "tools/call") if modern else refused})

    async def result(self, rid: Any, name: str, arguments: dict[str, Any], token: str | int | None = None,
                     modern: bool = False, prepared: Prepared | None = None) -> dict[str, Any] | None:
        """Serve the call, whose thread writes its answer (None); or MCP's tool result of its
        refusal or failure (a tool error) for the loop to write. `token`: the client's
        progressToken, which the call's long work reports to (notifications/progress). `prepared`:
        its tool and request, where `now` checked and validated them already."""
        checked = self.prepare(name, arguments) if prepared is None else prepared
        if isinstance(checked, dict):
            return checked
        tool, request = checked
        try:
            return await serve_call(self.engine, tool, request,
                                    lambda payload: self.answered(rid, tool, payload, modern),
                                    None if token is None else self.progress(token), at_once=True)
        except Exception as e:
            return _tool_result(self.gate.failure(name, e), True)

    def answered(self, rid: Any, tool: Tool, payload: dict[str, Any], modern: bool = False) -> None:
        """Write a call's answer where the call ran: the client has it without waiting for the
        event loop to wake (0.1 ms and more here). A call cancelled meanwhile gets none."""
        if cancelled():
            return
        if modern:
            text, structured = reply(payload, tool.output_schema is not None)
            self.send({"jsonrpc": "2.0", "id": rid, "result": stamped(_tool_result(text, structured=structured),
                                                                       "tools/call")})
            return
        self.write(b'{"jsonrpc":"2.0","id":' + json_bytes(rid) + b',"result":'
                   + reply_bytes(payload, tool.output_schema is not None) + b"}\n")

    def progress(self, token: str | int) -> Callable[[int, int, str], None]:
        """notifications/progress for `token`, written from the thread the call runs on."""
        def send(done: int, total: int, what: str) -> None:
            if not cancelled():
                self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": token, "progress": done, "total": total, "message": what}})
        return send

    async def serve(self) -> None:
        """Until stdin ends (`take` is given each line), then the client's calls and tasks are dropped."""
        await self.ended
        works = [t.work for t in self.tasks.tasks.values() if t.work is not None]
        for task in [*self.running.values(), *works]:  # the client is gone: its calls' and tasks' work is dropped
            task.cancel()
        await asyncio.gather(*self.running.values(), *works, return_exceptions=True)


def serve(engine: Retriever, tools: Sequence[Tool]) -> None:
    """Serve MCP on this process's stdin and stdout until the client closes stdin."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # fd 1 (and print) now reach stderr; the protocol has its own copy
    sys.stdout = sys.stderr
    server = StdioServer(engine, tools, out)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server.ended = loop.create_future()
        if not read_on_loop(loop, server.take):
            read_on_thread(loop, server.take)
        await server.serve()

    try:
        asyncio.run(main())
    finally:
        with contextlib.suppress(OSError):  # the client may have closed its end
            out.close()


__all__ = ["ProtocolError", "StdioServer", "serve"]
