"""MCP tasks (the 2025-11-25 revision's experimental utility), for both transports and without an
MCP framework: a `tools/call` with `params.task`, of a tool listed with `execution.taskSupport`
(api/tool.py `long`), is answered at once with the task, and the call runs on in the background
through the same gate (core.py) and serve_call (serving.py) as a plain call: the same refusals, limits and
worker threads. `tasks/get` tells its status, `tasks/result` waits for its end and answers what the
plain call would have (the CallToolResult), `tasks/cancel` cancels it as notifications/cancelled
does a plain call (its work stops at its next chunk or file: limits.CANCEL), `tasks/list` lists them.

Bounded: an owner (a caller told apart by its token over HTTP, compute.CALLER; else its MCP
session) keeps at most MAX_KEPT tasks, the server MAX_TASKS in all; a task is dropped `ttl` after
its creation (at most MAX_TTL_MS; one still working then, when it ends). An owner sees only its own
tasks. stdio.py and server.py speak the wire; this module keeps the tasks.

The 2026-07-28 revision moved tasks into the extension `io.modelcontextprotocol/tasks` (SEP-2663;
its schema.ts and specification/draft/tasks.md in modelcontextprotocol/ext-tasks), served from the
same store, bounds and owners: the server declares it in `capabilities.extensions`; a client
declares it on each request (`_meta["io.modelcontextprotocol/clientCapabilities"].extensions`) and
the server decides: a long tool's `tools/call` from a client that declared it is answered with a
CreateTaskResult (`resultType: "task"` and the Task: taskId, status, createdAt, lastUpdatedAt,
ttlMs, pollIntervalMs), never to one that did not (`params.task` is ignored, as the SEP says);
`tasks/get` answers the task with its result inline once `completed` (a tool error too: `failed` is
for a JSON-RPC error alone, with `error`), `tasks/cancel` and `tasks/update` an empty
acknowledgement (no task of ours asks for input: the SEP has a server ignore responses to keys not
outstanding); `tasks/result` and `tasks/list` are gone (-32601). A client that did not declare the
extension gets -32021 for tasks/*. No tool here requires a task, so none answers -32021 to a call."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..security.limits import Report
from .jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

if TYPE_CHECKING:
    from .core import Gate

log = logging.getLogger("retriever.mcp")

VERSIONS = ("2025-11-25",)  # the revisions whose core has tasks (2026-07-28 moved them to an extension)
CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
RELATED = "io.modelcontextprotocol/related-task"  # the _meta key of tasks/result's answer
MAX_KEPT = 16  # tasks one owner keeps (working or ended, until their ttl)
MAX_TASKS = 256  # tasks the server keeps in all
DEFAULT_TTL_MS = 10 * 60_000  # when the client names none
MAX_TTL_MS = 60 * 60_000
POLL_MS = 1000
CANCELLED = -32800  # tasks/result of a cancelled task: the code a cancelled request has (LSP's RequestCancelled)
METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list")
EXTENSION = "io.modelcontextprotocol/tasks"  # SEP-2663: the 2026-07-28 revision's tasks
EXTENSION_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"  # the _meta key of a stateless request
MISSING_CAPABILITY = -32021  # Missing Required Client Capability


class TaskError(Exception):
    """A JSON-RPC error for the client (code, message)."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.data = code, data


def declared(params: dict[str, Any]) -> bool:
    """Whether a stateless request's client declared the tasks extension (in this request's _meta)."""
    meta = params.get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def as_task(tools: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether a stateless tools/call runs as a task of the extension: the client declared it and
    the tool runs long (any other call runs plainly; the server decides, the client only allows)."""
    name = params.get("name")
    return declared(params) and isinstance(name, str) and getattr(tools.get(name), "long", False)


def undeclared(method: str) -> TaskError:
    return TaskError(MISSING_CAPABILITY, f"Missing required client capability: {method} needs the {EXTENSION} "
                                         "extension declared in the request's _meta clientCapabilities",
                     {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Task:
    owner: str
    tool: str
    ttl: int  # ms
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    status: str = "working"
    message: str | None = None
    created: str = field(default_factory=_now)
    updated: str = ""
    born: float = field(default_factory=time.monotonic)
    result: dict[str, Any] | None = None  # the CallToolResult, once ended
    error: dict[str, Any] | None = None  # a JSON-RPC error, where the call failed as no tool error
    work: asyncio.Task[None] | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def wire(self) -> dict[str, Any]:
        """The Task as MCP's schema has it."""
        out: dict[str, Any] = {"taskId": self.id, "status": self.status, "createdAt": self.created,
                               "lastUpdatedAt": self.updated or self.created, "ttl": self.ttl, "pollInterval": POLL_MS}
        if self.message:
            out["statusMessage"] = self.message
        return out

    def detailed(self) -> dict[str, Any]:
        """The task as the tasks extension (SEP-2663) has it: its DetailedTask, the result inline
        once completed. A tool error is a result there (`completed`, the result's isError);
        `failed` is for a JSON-RPC error alone."""
        failed = self.status == "failed" and self.error is not None
        status = "completed" if self.status == "failed" and not failed else self.status
        out: dict[str, Any] = {"taskId": self.id, "status": status, "createdAt": self.created,
                               "lastUpdatedAt": self.updated or self.created, "ttlMs": self.ttl,
                               "pollIntervalMs": POLL_MS}
        if self.message:
            out["statusMessage"] = self.message
        if status == "completed":
            out["result"] = self.result
        elif failed:
            out["error"] = self.error
        return out

    def progress(self, done: int, total: int, what: str) -> None:
        """The call's progress (limits.PROGRESS, from the thread it runs on) as the task's status message."""
        if not self.ended.is_set():
            self.message, self.updated = f"{done} of {total} done: {what}"[:300], _now()

    def end(self, status: str, message: str | None = None, result: dict[str, Any] | None = None) -> None:
        if self.ended.is_set():  # terminal: it stays as it is (a cancelled task stays cancelled)
            return
        self.status, self.message, self.result, self.updated = status, message, result, _now()
        self.ended.set()

    def expired(self, now: float) -> bool:
        return self.ended.is_set() and now - self.born > self.ttl / 1000


class Tasks:
    """The tasks of one server."""

    def __init__(self, kept: int = MAX_KEPT, total: int = MAX_TASKS) -> None:
        self.kept, self.total = kept, total
        self.tasks: dict[str, Task] = {}

    def create(self, owner: str, tool: str, ttl: Any, run: Callable[[Report], Awaitable[dict[str, Any]]]) -> Task:
        """A task of `owner` that runs `run(progress)` (the call's CallToolResult) on the running loop;
        what its work reports to `progress` becomes the task's statusMessage (tasks/get shows it)."""
        self._drop_expired()
        mine = [t for t in self.tasks.values() if t.owner == owner]
        if len(mine) >= self.kept or len(self.tasks) >= self.total:
            ended = [t for t in (mine if len(mine) >= self.kept else self.tasks.values()) if t.ended.is_set()]
            if not ended:
                raise TaskError(INVALID_PARAMS, f"{len(mine)} tasks of this client are still working (at most "
                                                f"{self.kept} kept, {self.total} in all); wait for one to end")
            del self.tasks[min(ended, key=lambda t: t.born).id]  # the oldest ended one makes room
        asked = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else DEFAULT_TTL_MS
        task = Task(owner, tool, min(asked, MAX_TTL_MS))
        self.tasks[task.id] = task
        task.work = asyncio.get_running_loop().create_task(self._run(task, run))
        asyncio.get_running_loop().call_later(task.ttl / 1000, self._drop_expired)
        return task

    def start(self, owner: str, gate: Gate, params: dict[str, Any], also: Report | None = None,
              extension: bool = False) -> dict[str, Any]:
        """A tools/call (`params`) to run as a task, for both servers: the task's answer at once
        (`extension`: the tasks extension's CreateTaskResult), the call on in the background through
        `gate` (its progress to the task's statusMessage, and to `also` where the client gave a
        progressToken); TaskError if refused."""
        name, arguments = params.get("name"), params.get("arguments") or {}
        task = None if extension else params.get("task")  # the extension ignores `task`: the server decides
        refused = _refusal(gate.tools, name)
        if refused is not None:
            raise refused
        if not isinstance(arguments, dict):
            raise TaskError(INVALID_PARAMS, "Invalid params: tools/call takes arguments as an object")
        made = self.create(owner, str(name), task.get("ttl") if isinstance(task, dict) else None,
                           lambda report: gate.call_result(str(name), arguments, _both(report, also)))
        return {"resultType": "task", **made.detailed()} if extension else {"task": made.wire()}

    async def _run(self, task: Task, run: Callable[[Report], Awaitable[dict[str, Any]]]) -> None:
        try:
            result = await run(task.progress)
        except asyncio.CancelledError:
            task.end("cancelled", "The task was cancelled by request.")
            return
        except Exception as e:  # run() answers failures as tool errors; anything else is our bug
            log.error("task %s (%s): internal error", task.id, task.tool, exc_info=e)
            task.error = {"code": INTERNAL_ERROR, "message": f"{task.tool}: internal error ({type(e).__name__})"}
            result = {"content": [{"type": "text", "text": f"{task.tool}: internal error ({type(e).__name__})"}],
                      "isError": True}
        if result.get("isError"):
            text = next((c.get("text") for c in result.get("content", ()) if c.get("type") == "text"), None)
            task.end("failed", (text or "the call failed")[:500], result)
        else:
            task.end("completed", None, result)
        if task.expired(time.monotonic()):
            self.tasks.pop(task.id, None)

    def _drop_expired(self) -> None:
        now = time.monotonic()
        for t in [t for t in self.tasks.values() if t.expired(now)]:
            del self.tasks[t.id]

    def find(self, owner: str, params: dict[str, Any]) -> Task:
        """The task `params` names, if `owner` made it (another's is as unknown as one that never was)."""
        self._drop_expired()
        named = params.get("taskId")
        task = self.tasks.get(named) if isinstance(named, str) else None
        if task is None or task.owner != owner:
            raise TaskError(INVALID_PARAMS, "Failed to retrieve task: Task not found (or expired)")
        return task

    async def answer(self, owner: str, method: str, params: dict[str, Any], extension: bool = False) -> dict[str, Any]:
        """The result of one tasks/* request of `owner` (`extension`: of the tasks extension)."""
        if extension:
            return self._extension_answer(owner, method, params)
        if method == "tasks/list":
            if params.get("cursor") is not None:
                raise TaskError(INVALID_PARAMS, "Invalid cursor: tasks/list here answers in one page")
            self._drop_expired()
            return {"tasks": [t.wire() for t in self.tasks.values() if t.owner == owner]}
        task = self.find(owner, params)
        if method == "tasks/get":
            return task.wire()
        if method == "tasks/cancel":
            if task.ended.is_set():
                raise TaskError(INVALID_PARAMS, f"Cannot cancel task: it is already {task.status}")
            task.end("cancelled", "The task was cancelled by request.")
            if task.work is not None:
                task.work.cancel()  # serving.run sets the call's CANCEL event: its work stops at its next chunk
            return task.wire()
        if method == "tasks/result":
            await task.ended.wait()
            if task.status == "cancelled" or task.result is None:
                raise TaskError(CANCELLED, f"Task {task.id} was cancelled")
            return {**task.result, "_meta": {**task.result.get("_meta", {}), RELATED: {"taskId": task.id}}}
        raise TaskError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _extension_answer(self, owner: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """tasks/get (the DetailedTask), /cancel and /update (empty acknowledgements) of the extension;
        the caller has checked that the client declared it."""
        if method not in EXTENSION_METHODS:  # tasks/result, tasks/list: not in the extension
            raise TaskError(METHOD_NOT_FOUND, f"Method not found: {method} (not in the {EXTENSION} extension)")
        task = self.find(owner, params)
        if method == "tasks/get":
            return {**task.detailed(), "resultType": "complete"}
        if method == "tasks/update" and not isinstance(params.get("inputResponses"), dict):
            raise TaskError(INVALID_PARAMS, "Invalid params: tasks/update takes inputResponses (an object)")
        if method == "tasks/cancel" and not task.ended.is_set():  # an ended task stays as it ended
            task.end("cancelled", "The task was cancelled by request.")
            if task.work is not None:
                task.work.cancel()  # serving.run sets the call's CANCEL event: its work stops at its next chunk
        return {"resultType": "complete"}  # tasks/update: none of our tasks asks for input; ignored


def _both(first: Report, then: Report | None) -> Report:
    if then is None:
        return first

    def report(done: int, total: int, what: str) -> None:
        first(done, total, what)
        then(done, total, what)
    return report


def _refusal(tools: dict[str, Any], name: Any) -> TaskError | None:
    """Why a tools/call of `name` may not run as a task (None: it may): MCP says -32601 for a tool
    whose listing has no taskSupport."""
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None or not getattr(tool, "long", False):
        return TaskError(METHOD_NOT_FOUND, f"Tool {str(name)[:100]!r} does not support task-augmented execution "
                                           "(its tools/list entry has no execution.taskSupport); call it plainly")
    return None


__all__ = ["CAPABILITY", "EXTENSION", "METHODS", "VERSIONS", "Task", "TaskError", "Tasks", "as_task", "declared",
           "undeclared"]
