"""The stdio server (mcp/stdio.py) speaks MCP without a framework: it must list and answer exactly
as the FastMCP server does (the same registry, gate and replies), speak JSON-RPC's errors, cancel,
keep stdout for the protocol alone, and import no MCP framework."""

from __future__ import annotations

import asyncio
import json
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN
from fastmcp import Client
from retriever.mcp.server import build_server
from retriever.testing.projects import engine_for

Q = "what causes earthquakes"


class _AnyText(str):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)

    __hash__ = str.__hash__


ANY_TEXT = _AnyText()
CALLS = [  # (tool, arguments) in the full profile: answers, a client's mistakes and refusals
    ("retriever_init", {}),
    ("bm25_search", {"query_list": [Q], "top_k": 3}),
    ("retriever_search", {"query_list": [Q, "volcano"], "top_k": 2, "return_text": False}),
    ("retriever_hybrid_search", {"query_list": Q, "top_k": 2}),
    ("search", {"query": Q, "top_k": 2, "mode": "bm25"}),  # structured output (the agent tools)
    ("bm25_search", {"query_list": [Q], "top_k": 0}),  # out of range
    ("bm25_search", {"query_list": [Q], "bogus": 1}),  # unknown argument
    ("bm25_search", {"top_k": 2}),  # a required one missing
    ("bm25_search", {"query_list": [Q], "top_k": "many"}),  # wrong type
    ("retriever_search", {"query_list": [Q], "collection": "nowhere"}),  # our error
    ("no_such_tool", {}),
    ("bm25_search", {"query_list": ["x" * 16 * 1024 * 1024]}),  # over limits.max_request_bytes (16 MiB)
]


class Raw:
    """`retriever serve` over stdio, spoken to line by line."""

    def __init__(self, *args: str, argv: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(argv or [str(BIN / "retriever"), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stdout: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr.start()
        self.stderr = b""
        self._id = 0

    def _read_stderr(self) -> None:
        self.stderr = self.proc.stderr.read()  # type: ignore[union-attr]

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.stdout.append(line)
            self.lines.put(line)

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def send(self, method: str, params: dict[str, Any] | None = None, rid: Any = None) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if rid is not None:
            message["id"] = rid
        self.write(json.dumps(message).encode() + b"\n")
        return rid

    def next(self, timeout: float = 120) -> dict[str, Any]:
        return json.loads(self.lines.get(timeout=timeout))

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        self.send(method, params, self._id)
        while True:
            message = self.next()
            if message.get("id") == self._id:
                return message

    def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        answer = self.ask("initialize", {"protocolVersion": version, "capabilities": {},
                                         "clientInfo": {"name": "test", "version": "1"}})
        self.send("notifications/initialized")
        return answer

    def close(self) -> int:
        """Close stdin; the server's exit code. Its stderr must reach its end too: no process it
        left behind holds the client's pipes."""
        self.proc.stdin.close()  # type: ignore[union-attr]
        code = self.proc.wait(60)
        self._stderr.join(60)
        assert not self._stderr.is_alive(), "a process the server left behind holds its stderr open"
        return code


def fastmcp_side(config: Path, profile: str) -> tuple[str | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """The FastMCP server's instructions, tools/list and answers to CALLS, on the wire's form."""
    async def run() -> tuple[str | None, list[dict[str, Any]], list[dict[str, Any]]]:
        async with Client(build_server(engine_for(config), profile=profile), timeout=120) as client:
            listed = [{k: v for k, v in t.model_dump(by_alias=True, exclude_none=True, mode="json").items()
                       if k != "_meta"} for t in await client.list_tools()]
            answers = []
            for name, arguments in CALLS:
                got = await client.call_tool_mcp(name, arguments)
                answers.append(got.model_dump(by_alias=True, exclude_none=True, mode="json"))
            return client.instructions, listed, answers

    return asyncio.run(run())


@pytest.mark.parametrize("profile", ["full", "agent"])
def test_lists_and_answers_as_the_fastmcp_server(built_project: Path, profile: str) -> None:
    """The same tools (definitions, order, the hidden ones left out), the same instructions and
    the same answer to every call, good or bad, as the FastMCP server over the same project."""
    instructions, listed, answers = fastmcp_side(built_project, profile)
    raw = Raw("serve", "--config", str(built_project), "--tools", profile)
    init = raw.initialize()["result"]
    assert init["instructions"] == instructions
    assert raw.ask("tools/list")["result"]["tools"] == listed
    got = [raw.ask("tools/call", {"name": name, "arguments": arguments})["result"] for name, arguments in CALLS]
    assert raw.close() == 0
    for (name, arguments), ours, theirs in zip(CALLS, got, answers):
        theirs = {k: v for k, v in theirs.items() if k not in ("_meta", "resultType")}
        assert ours == theirs, (name, str(arguments)[:80])
    texts = [a["content"][0]["text"] for a in got]
    if profile == "agent":  # none of the ultrarag tools: each call but `search` is refused
        assert [a["isError"] for a in got] == [name != "search" for name, _ in CALLS]
        return
    assert json.loads(texts[1])["ret_ids"][0][0] == "doc11" and not got[1]["isError"]
    assert [a["isError"] for a in got[5:]] == [True] * (len(CALLS) - 5), [t[:100] for t in texts[5:]]


def test_json_rpc_errors_and_the_handshake(built_project: Path) -> None:
    raw = Raw("serve", "--config", str(built_project))
    assert raw.initialize("1999-01-01")["result"]["protocolVersion"] == "2025-11-25"  # ours, the newest
    assert raw.initialize("2024-11-05")["result"]["protocolVersion"] == "2024-11-05"
    assert raw.ask("ping") == {"jsonrpc": "2.0", "id": raw._id, "result": {}}
    assert raw.ask("server/discover")["result"]["supportedVersions"] == ["2026-07-28"]  # the stateless revision too
    assert raw.ask("resources/list")["result"] == {"resources": []}
    assert raw.ask("tools/call", {"name": 5})["error"]["code"] == -32602
    assert raw.ask("tools/call", {"name": "search", "arguments": [1]})["error"]["code"] == -32602
    raw.write(b"{not json\n")
    assert raw.next()["error"]["code"] == -32700
    raw.write(b"[1, 2]\n")
    assert raw.next()["error"]["code"] == -32600
    raw.write(b'{"jsonrpc": "2.0", "id": 99, "result": {}}\n')  # a response to nothing: ignored
    assert raw.ask("ping")["id"] == raw._id
    # inputs that once stopped the server: each is answered (or ignored) and the next request still is
    raw.write(b"[" * 100_000 + b"\n")  # nested past Python's recursion limit
    assert raw.next()["error"]["code"] == -32700
    raw.write(b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}\n')  # an id that is not a string or integer
    assert raw.next() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": ANY_TEXT}}
    raw.write(b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {}}}\n')
    raw.write(b'{"jsonrpc": "2.0", "id": 7, "method": null}\n')
    assert raw.next()["error"]["code"] == -32600
    raw.write(b'{"jsonrpc": "2.0", "id": "s-1", "method": "\\ud800"}\n')  # a lone surrogate, echoed in the error
    assert raw.next()["id"] == "s-1"
    raw.write(json.dumps({"jsonrpc": "2.0", "id": "s-2", "method": "tools/call", "params": {
        "name": "search", "arguments": {"query": "\ud800 earthquakes", "mode": "bm25"}}}).encode() + b"\n")
    assert raw.next()["id"] == "s-2"
    assert raw.ask("ping")["id"] == raw._id
    assert raw.close() == 0
    assert all(json.loads(line) for line in raw.stdout)


def test_a_cancelled_call_gets_no_answer_and_its_work_stops(built_project: Path) -> None:
    raw = Raw("--log-level", "INFO", "serve", "--config", str(built_project), "--tools", "full", "--init")
    raw.initialize()
    raw.send("tools/call", {"name": "retriever_search", "arguments": {
        "query_list": [f"{Q} {i}" for i in range(6000)], "return_text": False}}, rid="slow")
    time.sleep(1)  # the work has begun
    raw.send("notifications/cancelled", {"requestId": "slow", "reason": "test"})
    answer = raw.ask("tools/call", {"name": "bm25_search", "arguments": {"query_list": [Q], "top_k": 1}})
    assert json.loads(answer["result"]["content"][0]["text"])["ret_ids"] == [["doc11"]]
    assert raw.close() == 0
    assert all(json.loads(line).get("id") != "slow" for line in raw.stdout)
    assert b"request cancelled" in raw.stderr
    done = re.search(rb"cancelled by the caller after (\d+) of 6000 queries", raw.stderr)
    assert done and int(done.group(1)) < 6000, raw.stderr[-2000:]


STRAY = """
import gc, multiprocessing, os, sys, threading, time
from retriever.main import main
from retriever.mcp import stdio

answer = stdio.StdioServer.answer
def noisy(self, method, params):
    print("a stray print")
    os.write(1, b"a native library's stray write\\n")
    if method == "tools/list":  # as OpenVINO's telemetry does at import: a process forked from a thread
        print("threads while serving:", sorted(t.name for t in threading.enumerate()), file=sys.stderr)
        print("gc while serving: enabled", gc.isenabled(), "frozen", gc.get_freeze_count() > 0, file=sys.stderr)
        fork = lambda: multiprocessing.get_context("fork").Process(target=time.sleep, args=(0.1,)).start()
        threading.Thread(target=fork).start()
    return answer(self, method, params)
stdio.StdioServer.answer = noisy
code = main(sys.argv[1:])
frameworks = sorted({m.split(".")[0] for m in sys.modules} & {"fastmcp", "mcp"})
print("frameworks imported:", frameworks, file=sys.stderr)
sys.exit(code)
"""


def test_stdout_is_the_protocols_alone_and_no_framework_is_imported(built_project: Path) -> None:
    """A print, ours or a native library's, goes to stderr: planted in the server, it does not
    reach the client. A process forked from a thread while stdin is read exits (a lock on
    sys.stdin held at the fork would hang it, and the client's pipes with it). And a stdio server
    that listed and answered never imported fastmcp or mcp."""
    raw = Raw(argv=[sys.executable, "-c", STRAY, "serve", "--config", str(built_project)])
    raw.initialize()
    assert raw.ask("tools/list")["result"]["tools"]
    assert raw.ask("tools/call", {"name": "search", "arguments": {"query": Q, "mode": "bm25"}})["result"]["isError"] \
        is False
    assert raw.close() == 0
    assert [json.loads(line)["jsonrpc"] for line in raw.stdout] == ["2.0"] * 3
    assert b"a stray print" in raw.stderr and b"a native library's stray write" in raw.stderr
    assert b"frameworks imported: []" in raw.stderr
    # the event loop reads the pipe itself: no thread waits on stdin to wake it (one hand-off less per call)
    serving = re.search(rb"threads while serving: (.*)", raw.stderr)
    assert serving and b"'stdin'" not in serving.group(1), serving
    # collection was off while it started (memory.start_up) and is on while it serves, start-up's objects frozen
    assert b"gc while serving: enabled True frozen True" in raw.stderr


def test_a_quick_search_runs_on_the_loop_a_small_one_on_the_compute_thread(built_project: Path) -> None:
    """A quick search (one query of this process's indexes, no filter: api/hits.py quick) runs and
    answers on the event loop, in the idle compute thread's place: no hand-off at all. Another
    search of at most one chunk of queries runs on the compute thread, where its encode and index
    search run, and writes its answer there: no hand-off to a worker and none back to the event
    loop. A larger one runs on a worker (other calls' chunks take turns with its own), which writes
    its answer too; a refused call is answered by the loop."""
    from retriever.mcp.core import served_tools
    from retriever.mcp.stdio import StdioServer
    from retriever.security.limits import CHUNK

    engine = engine_for(built_project)
    engine.init()
    searched: list[str] = []
    search = engine.search
    engine.search = lambda *a, **k: searched.append(threading.current_thread().name) or search(*a, **k)  # type: ignore[method-assign]

    class Out:
        def __init__(self) -> None:
            self.written: list[tuple[str, dict[str, Any]]] = []

        def write(self, data: bytes) -> int:
            self.written += [(threading.current_thread().name, json.loads(line)) for line in data.splitlines()]
            return len(data)

        def flush(self) -> None:
            pass

    out = Out()
    server = StdioServer(engine, served_tools(engine, profile="full"), out)  # type: ignore[arg-type]
    calls = [("retriever_search", {"query_list": [Q], "top_k": 1}),
             ("retriever_search", {"query_list": [Q] * (CHUNK + 1), "top_k": 1, "return_text": False}),
             ("retriever_hybrid_search", {"query_list": [Q, Q], "top_k": 1}),  # two queries: not quick
             ("search", {"query": Q, "top_k": 1, "mode": "dense"}),  # the agent's: one query as a string
             ("no_such_tool", {})]

    async def run() -> None:
        for rid, (name, arguments) in enumerate(calls, 1):
            await server.handle(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                            "params": {"name": name, "arguments": arguments}}).encode())
            await asyncio.gather(*server.running.values())

    asyncio.run(run())
    assert [m["id"] for _, m in out.written] == [1, 2, 3, 4, 5]
    small, large, hybrid, agent, refused = out.written
    for _, answer in (small, large, hybrid):
        assert not answer["result"]["isError"]
        assert json.loads(answer["result"]["content"][0]["text"])["ret_ids"][0] == ["doc11"]
    assert agent[1]["result"]["structuredContent"]["results"][0]["hits"][0]["id"] == "doc11"
    assert refused[1]["result"]["isError"]
    where = {"compute": "retriever-compute", "loop": threading.current_thread().name}
    assert searched[0] == small[0] == where["loop"], (searched, small[0])
    assert searched[2].startswith(where["compute"]) and hybrid[0].startswith(where["compute"])
    assert searched[3] == agent[0] == where["loop"]
    assert not searched[1].startswith(where["compute"]) and large[0] == searched[1] != where["loop"]
    assert refused[0] == where["loop"]


def test_requests_from_a_file_are_answered(built_project: Path, tmp_path: Path) -> None:
    """stdin a regular file, which the event loop cannot watch: it is read on a thread instead,
    every request is answered (the last one without its newline too) and the server exits."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        + "\n" + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    with requests.open("rb") as stdin:
        done = subprocess.run([str(BIN / "retriever"), "serve", "--config", str(built_project)], stdin=stdin,
                              capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"] == {}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_s_own_client_speaks_both_eras_with_our_stdio_server(built_project: Path, mode: str) -> None:
    """The official MCP SDK 2.x client probes server/discover first ('auto'): our stdio server used
    to answer "method not found", so it fell back to 2025-11-25 while over HTTP it got 2026-07-28."""
    import asyncio

    from mcp.client.client import Client as SDKClient
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=str(BIN / "retriever"), args=["serve", "--config", str(built_project)])

    async def run() -> tuple[str, set[str], Any]:
        async with SDKClient(params, mode=mode) as client:  # type: ignore[arg-type]
            tools = {t.name for t in (await client.list_tools()).tools}
            hit = await client.call_tool("search", {"query": "what is BM25?", "top_k": 1})
            return client.protocol_version, tools, hit

    version, tools, hit = asyncio.run(run())
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert "search" in tools and not hit.is_error and hit.structured_content["results"][0]["hits"]


def test_a_stateless_request_of_an_unknown_revision_is_told_which_are_served(built_project: Path) -> None:
    raw = Raw("serve", "--config", str(built_project))
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2031-01-01",
                      "io.modelcontextprotocol/clientCapabilities": {}}}
    error = raw.ask("tools/list", meta)["error"]
    assert error["code"] == -32022 and error["data"]["supported"] == ["2026-07-28"]
    meta["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
    found = raw.ask("server/discover", meta)["result"]
    assert found["supportedVersions"] == ["2026-07-28"] and found["resultType"] == "complete"
    listed = raw.ask("tools/list", meta)["result"]
    assert listed["resultType"] == "complete" and listed["ttlMs"] == 0 and listed["tools"]


FORK_WHILE_HELD = """
import multiprocessing, threading
from retriever import compute
held, release = threading.Event(), threading.Event()
def hold():
    with compute._executor._cond:  # as the compute thread holds it while it takes work
        held.set()
        release.wait()
threading.Thread(target=hold).start()
held.wait()
child = multiprocessing.get_context("fork").Process(target=int)
child.start()
child.join(10)
release.set()
print("child exit", child.exitcode)
if child.exitcode is None:
    child.kill()
"""


def test_a_child_forked_while_the_compute_lock_is_held_exits() -> None:
    """The cause of the STRAY test's rare hang above: a child forked while another thread held the
    compute executor's lock inherited it held, and its exit (the executor's shutdown, registered
    to run at exit) waited on it for ever; the server, waiting on its child, never exited."""
    out = subprocess.run([sys.executable, "-c", FORK_WHILE_HELD], capture_output=True, text=True, timeout=60)
    assert "child exit 0" in out.stdout, (out.stdout, out.stderr[-2000:])


def test_a_quick_search_is_answered_as_its_line_arrives(built_project: Path) -> None:
    """A quick search is served in `dispatch` itself (mcp/serving.py serve_here): its answer is written
    before dispatch returns, with no task made for it. A search that is not quick (a filter) goes
    on a task, validated once (its request handed over, not validated again); a search whose
    arguments do not validate is answered in dispatch too."""
    from retriever.mcp.core import served_tools
    from retriever.mcp.stdio import StdioServer

    engine = engine_for(built_project)
    engine.init()

    class Out:
        def __init__(self) -> None:
            self.written: list[dict[str, Any]] = []

        def write(self, data: bytes) -> int:
            self.written += [json.loads(line) for line in data.splitlines()]
            return len(data)

        def flush(self) -> None:
            pass

    out = Out()
    server = StdioServer(engine, served_tools(engine, profile="agent"), out)  # type: ignore[arg-type]
    validated: list[str] = []
    request_now = server.gate.request_now
    server.gate.request_now = lambda tool, arguments: validated.append(tool.name) or request_now(tool, arguments)  # type: ignore[method-assign]

    def line(rid: int, arguments: dict[str, Any], name: str = "search") -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}}).encode()

    async def run() -> None:
        server.dispatch(line(1, {"query": Q, "top_k": 1, "mode": "dense"}))
        assert [m["id"] for m in out.written] == [1] and not server.running  # answered, no task
        server.dispatch(line(2, {"query": Q, "top_k": 0}))  # top_k below its range
        assert [m["id"] for m in out.written] == [1, 2] and not server.running
        server.dispatch(line(3, {"query": Q, "top_k": 1, "mode": "dense",
                                 "filters": {"field": "id", "operator": "==", "value": "doc11"}}))
        assert list(server.running) == [3] and len(out.written) == 2  # not quick: on a task
        await asyncio.gather(*server.running.values())

    asyncio.run(run())
    quick, invalid, filtered = out.written
    assert quick["result"]["structuredContent"]["results"][0]["hits"][0]["id"] == "doc11"
    assert invalid["result"]["isError"] and "top_k" in invalid["result"]["content"][0]["text"]
    assert filtered["result"]["structuredContent"]["results"][0]["hits"][0]["id"] == "doc11"
    assert validated == ["search", "search", "search"]  # once each: quick, invalid, filtered (not twice)
