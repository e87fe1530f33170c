"""Per-call overhead: our servers against servers that do nothing but send the same reply bytes to
the same client. Over stdio, `retriever serve` (the agent profile's `search`, mode dense and bm25)
against a do-nothing stdio MCP server, driven by the MCP SDK's client (ClientSession over
stdio_client) and by a bare client (one JSON-RPC line written, one read); over HTTP, `retriever
deploy`'s POST /search against a bare Starlette app under the same uvicorn, driven by one httpx
client with keep-alive. Writes its section of bench/LEAN.md.

    .venv/bin/python bench/call_overhead.py [--docs 1000] [--queries 300] [--rounds 5]

The corpus: the first `--docs` SciFact passages, indexed once (bench/out/call_overhead/, by
`retriever index`, the YAML's embedder: `runtime: auto`). Our replies are recorded first (one
call per kind and query); the do-nothing servers replay them byte for byte (only the JSON-RPC id
differs), looked up by the request's arguments. Two of them per transport: one answers at once
(what the pipes, the client and a minimal server cost), one first makes the raw library calls
of that search in its own process (the embedder's runtime on the same export and FAISS on the
same index file for dense; bm25s built from the same corpus for BM25, as bench/startup.py's raw
calls): ours less it is our own handling, the goal (issue 46: within +0.5 ms). The three servers
of a transport run side by side and each query goes to all three in a rotating order, kinds
interleaved, for `--rounds` rounds with fresh servers; medians of all calls, and each round's.
Every process the bench starts listens on 127.0.0.1 only and is stopped by it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from report import ROOT, SCIFACT, scifact_queries, write_section
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import write_project
from startup import RAW_LIBRARIES

BIN = Path(sys.executable).parent
OUT = ROOT / "bench" / "out" / "call_overhead"
KINDS = ("dense", "bm25")
SERVERS = ("ours", "instant", "busy")  # ours; do-nothing at once; do-nothing after the raw calls
TOP_K = 5  # the agent's default hits per query; the HTTP body asks the same
PROTOCOL = "2025-11-25"  # what the MCP SDK's ClientSession (mcp 2.3) asks in `initialize`: checked below

RAW = r"""
import numpy as np, faiss, bm25s, Stemmer
from pathlib import Path
runtime, precision, model, export, graph, faiss_file, corpus, top_k = conf["raw"]
""" + RAW_LIBRARIES + r"""
WORK = {"dense": lambda q: index.search(encode(q), top_k),
        "bm25": lambda q: bm25.retrieve(bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False),
                                        k=top_k, show_progress=False)}
"""

HEAD = r"""
import json, os, sys
conf = json.loads(sys.argv[1])
table = json.load(open(conf["table"], encoding="utf-8"))
replies = {key: value.encode() for key, value in table["calls"].items()}  # arguments (sorted JSON) -> result bytes
WORK = None
"""

STDIO = r"""
handshake = {m: table[m].encode() for m in ("initialize", "tools/list")}
buffered = b""
while chunk := os.read(0, 1 << 16):
    buffered += chunk
    while b"\n" in buffered:
        line, buffered = buffered.split(b"\n", 1)
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message["method"]
        if method == "tools/call":
            arguments = message["params"]["arguments"]
            if WORK:
                WORK[arguments["mode"]](arguments["query"])
            result = replies[json.dumps(arguments, sort_keys=True)]
        else:
            result = handshake.get(method, b"{}")
        os.write(1, b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode() + b',"result":' + result + b"}\n")
"""

HTTP = r"""
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

async def search(request):
    arguments = json.loads(await request.body())
    if WORK:
        WORK[arguments["mode"]](arguments["query_list"][0])
    return Response(replies[json.dumps(arguments, sort_keys=True)], media_type="application/json")

async def ready(request):
    return Response(b"{}", media_type="application/json")

app = Starlette(routes=[Route("/search", search, methods=["POST"]), Route("/readyz", ready)])
"""
SERVE_HTTP = r"""
uvicorn.run(app, host="127.0.0.1", port=conf["port"], log_level="warning", access_log=False, log_config=None)
"""


# ---- the project and the raw calls' settings ---------------------------------------------------

def project(docs: int) -> Path:
    """The first `docs` SciFact passages, with dense and BM25 indexes built once (reused)."""
    folder = OUT / f"scifact-{docs}"
    config = folder / "parameter.yaml"
    if (folder / "out" / "faiss" / "manifest.json").exists() and (folder / "out" / "bm25" / "manifest.json").exists():
        return config
    write_project(folder, corpus=folder / "no-file")  # the corpus written below
    with (SCIFACT / "corpus.jsonl").open() as src:
        (folder / "corpus.jsonl").write_text("".join(line for _, line in zip(range(docs), src)))
    print(f"retriever index of {docs} SciFact passages (once)...", file=sys.stderr)
    subprocess.run([str(BIN / "retriever"), "--log-level", "WARNING", "index", "--config", str(config), "--overwrite"],
                   check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return config


def raw_settings(config: Path) -> list[Any]:
    """What the busy do-nothing server's raw calls need: the runtime and precision our index was
    embedded with, the export and graph our server runs (found as exported.py finds them)."""
    from retriever.config import load_config
    from retriever.embedders.exported import exported, openvino_ir

    cfg = load_config(config)
    faiss_dir = config.parent / "out" / "faiss"
    manifest = json.loads((faiss_dir / "manifest.json").read_text())
    runtime, precision = manifest["runtime"].split()
    export = graph = ""
    if runtime != "torch":
        export = str(exported(cfg))
        folder = exported(cfg, precision if runtime == "onnx" else "fp32")
        graph = str(openvino_ir(folder, "MiniLM") / "model.xml" if runtime == "openvino" else folder / "model.onnx")
    return [runtime, precision, cfg.resolved_model(), export, graph, str(faiss_dir / manifest["data"]),
            str(config.parent / "corpus.jsonl"), TOP_K]


# ---- processes ----------------------------------------------------------------------------------

class Procs:
    """Every process the bench starts, each stopped at the end (terminate, then kill)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], log: Path, **kw: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(args, cwd=ROOT, stderr=log.open("w"), **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        """A stdio server: its stdin closed, it exits (10 s at most); any other: terminated."""
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if proc.stdin is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in list(self.procs):
            self.stop(proc)


def ours_stdio(config: Path) -> list[str]:
    return [str(BIN / "retriever"), "--log-level", "WARNING", "serve", "--config", str(config)]


def do_nothing(table: Path, busy: list[Any] | None, body: str, port: int | None = None, marks: str = "") -> list[str]:
    """The do-nothing server's command: replays `table`; with `busy`, after the raw calls. `marks`:
    code run before it serves (bench/call_spans.py's marks)."""
    script = HEAD + (RAW if busy else "") + marks + body + (SERVE_HTTP if port is not None else "")
    return [sys.executable, "-c", script, json.dumps({"table": str(table), "raw": busy, "port": port})]


def arguments(kind: str, query: str) -> dict[str, Any]:
    return {"query": query, "mode": kind}


def key(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True)


# ---- the bare stdio client ----------------------------------------------------------------------

class Bare:
    """Newline-delimited JSON-RPC over a server process's pipes: one line written, one read."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.send, self.receive, self.rid = proc.stdin, proc.stdout, 0
        self.initialize = self.line("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                                   "clientInfo": {"name": "bench", "version": "1"}})
        self.send.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.send.flush()
        self.tools = self.line("tools/list", {})

    def line(self, method: str, params: dict[str, Any]) -> bytes:
        """The response line to one request (notifications before it skipped)."""
        self.rid += 1
        self.send.write(json.dumps({"jsonrpc": "2.0", "id": self.rid, "method": method, "params": params},
                                   separators=(",", ":")).encode() + b"\n")
        self.send.flush()
        while (answer := self.receive.readline()) and json.loads(answer).get("id") != self.rid:
            pass
        return answer

    def call(self, args: dict[str, Any]) -> bytes:
        return self.line("tools/call", {"name": "search", "arguments": args})


def result_bytes(line: bytes) -> bytes:
    """The `result` of one of our response lines, as sent: `{"jsonrpc":"2.0","id":N,"result":R}`."""
    head = line.index(b',"result":')
    assert line.startswith(b'{"jsonrpc":"2.0","id":') and line.rstrip().endswith(b"}"), line[:80]
    return line[head + len(b',"result":'):line.rstrip().rindex(b"}")]


def record(config: Path, queries: list[str], procs: Procs) -> tuple[Path, Path, int, int]:
    """Our replies, recorded: over stdio (bare client) and from the deploy service; written as the
    do-nothing servers' tables. Returns the tables and the replies' median sizes in bytes."""
    proc = procs.start(ours_stdio(config), OUT / "record-stdio.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    bare = Bare(proc)
    stdio = {"initialize": result_bytes(bare.initialize).decode(), "tools/list": result_bytes(bare.tools).decode(),
             "calls": {}}
    for kind in KINDS:
        for q in queries:
            line = bare.call(arguments(kind, q))
            assert b'"isError":false' in line, line[:300]
            stdio["calls"][key(arguments(kind, q))] = result_bytes(line).decode()
    procs.stop(proc)
    http: dict[str, Any] = {"calls": {}}
    with deploy(config, procs) as url, httpx.Client(timeout=60) as client:
        for kind in KINDS:
            for q in queries:
                body = http_body(kind, q)
                r = client.post(f"{url}/search", content=key(body), headers={"content-type": "application/json"})
                assert r.status_code == 200, r.text[:300]
                http["calls"][key(body)] = r.content.decode()
    tables = OUT / "stdio-table.json", OUT / "http-table.json"
    for path, table in zip(tables, (stdio, http)):
        path.write_text(json.dumps(table), encoding="utf-8")
    sizes = [statistics.median(len(v.encode()) for v in t["calls"].values()) for t in (stdio, http)]
    return tables[0], tables[1], int(sizes[0]), int(sizes[1])


def http_body(kind: str, query: str) -> dict[str, Any]:
    return {"query_list": [query], "mode": kind, "top_k": TOP_K}


@contextlib.contextmanager
def deploy(config: Path, procs: Procs, command: list[str] | None = None,
           env: dict[str, str] | None = None) -> Iterator[str]:
    """`retriever deploy` (or `command` in its place) on 127.0.0.1, ready; its URL."""
    port = free_port()
    log = OUT / "deploy.log"
    proc = procs.start([*(command or [str(BIN / "retriever")]), "--log-level", "WARNING", "deploy", "--config",
                        str(config), "--host", "127.0.0.1", "--port", str(port)], log, env={**os.environ, **(env or {})})
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", proc, lambda: log.read_text()[-2000:])
        yield f"http://127.0.0.1:{port}"
    finally:
        procs.stop(proc)


# ---- the three clients against the three servers ------------------------------------------------

Target = Callable[[str, str], Any]  # (kind, query) -> an awaitable of the call's seconds
Times = dict[str, dict[str, list[float]]]  # kind -> server -> ms per call


async def measure(targets: dict[str, Target], queries: list[str], warm: int = 5) -> Times:
    """Each query to every server and kind: servers in a rotating order, kinds alternating; the
    first `warm` queries once before, not counted."""
    for q in queries[:warm]:
        for kind in KINDS:
            for server in SERVERS:
                await targets[server](kind, q)
    times: Times = {kind: {server: [] for server in SERVERS} for kind in KINDS}
    for i, q in enumerate(queries):
        for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
            for server in SERVERS[i % 3:] + SERVERS[:i % 3]:
                times[kind][server].append(await targets[server](kind, q) * 1000)
    return times


async def sdk_round(config: Path, table: Path, busy: list[Any], queries: list[str]) -> Times:
    """The MCP SDK's client (ClientSession over stdio_client), one session per server."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    commands = {"ours": ours_stdio(config), "instant": do_nothing(table, None, STDIO),
                "busy": do_nothing(table, busy, STDIO)}
    async with contextlib.AsyncExitStack() as stack:
        sessions: dict[str, Any] = {}
        for server, (command, *args) in commands.items():
            errlog = stack.enter_context((OUT / f"sdk-{server}.log").open("w"))
            params = StdioServerParameters(command=command, args=args, cwd=str(ROOT))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            agreed = (await session.initialize()).protocol_version
            assert agreed == PROTOCOL, f"the SDK's client agreed {agreed}; set PROTOCOL to it"
            await session.list_tools()  # as a client does (the output schema its results are checked with)
            sessions[server] = session

        def target(session: Any) -> Target:
            async def call(kind: str, query: str) -> float:
                t = time.perf_counter()
                result = await session.call_tool("search", arguments(kind, query))
                took = time.perf_counter() - t
                assert not result.is_error, result
                return took
            return call

        return await measure({s: target(sessions[s]) for s in SERVERS}, queries)


async def bare_round(config: Path, table: Path, busy: list[Any], queries: list[str], procs: Procs,
                     replies: dict[str, Any], changed: dict[str, int]) -> Times:
    """The bare client, one process per server; each reply checked against ours as recorded."""
    commands = {"ours": ours_stdio(config), "instant": do_nothing(table, None, STDIO),
                "busy": do_nothing(table, busy, STDIO)}
    started = {s: procs.start(c, OUT / f"bare-{s}.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
               for s, c in commands.items()}
    try:
        clients = {s: Bare(p) for s, p in started.items()}

        def target(server: str) -> Target:
            async def call(kind: str, query: str) -> float:
                args = arguments(kind, query)
                t = time.perf_counter()
                line = clients[server].call(args)
                took = time.perf_counter() - t
                changed[server] += result_bytes(line).decode() != replies[key(args)]
                return took
            return call

        return await measure({s: target(s) for s in SERVERS}, queries)
    finally:
        for proc in started.values():
            procs.stop(proc)


async def http_round(config: Path, table: Path, busy: list[Any], queries: list[str], procs: Procs,
                     replies: dict[str, Any], changed: dict[str, int]) -> Times:
    """The deploy service and two bare Starlette apps, one httpx client with keep-alive."""
    urls: dict[str, str] = {}
    started: list[subprocess.Popen[bytes]] = []
    with deploy(config, procs) as url, httpx.Client(timeout=60) as client:
        urls["ours"] = url
        for server, work in (("instant", None), ("busy", busy)):
            port = free_port()
            log = OUT / f"http-{server}.log"
            started.append(procs.start(do_nothing(table, work, HTTP, port), log))
            wait_http(f"http://127.0.0.1:{port}/readyz", started[-1], lambda log=log: log.read_text()[-2000:])
            urls[server] = f"http://127.0.0.1:{port}"

        def target(server: str) -> Target:
            async def call(kind: str, query: str) -> float:
                body = key(http_body(kind, query))
                t = time.perf_counter()
                r = client.post(f"{urls[server]}/search", content=body, headers={"content-type": "application/json"})
                content = r.content
                took = time.perf_counter() - t
                changed[server] += r.status_code != 200 or content.decode() != replies[body]
                return took
            return call

        try:
            return await measure({s: target(s) for s in SERVERS}, queries)
        finally:
            for proc in started:
                procs.stop(proc)


# ---- the run and its report ---------------------------------------------------------------------

CLIENTS = ("the MCP SDK's client, stdio", "a bare client, stdio", "httpx, HTTP")


def others_running() -> str:
    found = subprocess.run(["pgrep", "-af", r"sync_bench.py|headless_memory.py|\.ci/run"], capture_output=True,
                           text=True).stdout.strip()
    return found.replace("\n", "; ") or "none"


def cpu_flags() -> str:
    words = set(Path("/proc/cpuinfo").read_text().split())
    return ", ".join(sorted(f for f in ("avx2", "avx512_bf16", "amx_bf16") if f in words))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1000, help="SciFact passages in the project")
    ap.add_argument("--queries", type=int, default=300, help="SciFact test queries, each a call per kind and server")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each with fresh servers")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "LEAN.md")
    ap.add_argument("--section", default="call-overhead")
    ap.add_argument("--no-write", action="store_true", help="print the section, do not write it")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    config = project(args.docs)
    queries = scifact_queries(args.queries)
    busy = raw_settings(config)
    procs = Procs()
    before = (others_running(), os.getloadavg()[0])
    try:
        stdio_table, http_table, stdio_bytes, http_bytes = record(config, queries, procs)
        stdio_replies = json.loads(stdio_table.read_text(encoding="utf-8"))["calls"]
        http_replies = json.loads(http_table.read_text(encoding="utf-8"))["calls"]
        changed = {c: dict.fromkeys(SERVERS, 0) for c in CLIENTS[1:]}
        rounds: dict[str, list[Times]] = {c: [] for c in CLIENTS}
        for i in range(args.rounds):
            rounds[CLIENTS[0]].append(asyncio.run(sdk_round(config, stdio_table, busy, queries)))
            rounds[CLIENTS[1]].append(asyncio.run(bare_round(config, stdio_table, busy, queries, procs,
                                                             stdio_replies, changed[CLIENTS[1]])))
            rounds[CLIENTS[2]].append(asyncio.run(http_round(config, http_table, busy, queries, procs,
                                                             http_replies, changed[CLIENTS[2]])))
            print(f"round {i + 1}/{args.rounds}: " + "; ".join(
                f"{c.split(',')[0]} {k} {over(rounds[c][-1], k):+.2f} ms" for c in CLIENTS for k in KINDS),
                file=sys.stderr)
    finally:
        procs.stop_all()
    after = (others_running(), os.getloadavg()[0])
    runtime = json.loads((config.parent / "out" / "faiss" / "manifest.json").read_text())["runtime"]
    body = report(args, rounds, changed, runtime, stdio_bytes, http_bytes, before, after)
    if not args.no_write:
        write_section(args.section, body, args.out)
    print(body)


def med(values: list[float]) -> float:
    return statistics.median(values)


def over(times: Times, kind: str, base: str = "busy") -> float:
    """Ours less a do-nothing server: the difference of the medians, ms."""
    return med(times[kind]["ours"]) - med(times[kind][base])


def pooled(rounds: list[Times], kind: str, server: str) -> list[float]:
    return [t for r in rounds for t in r[kind][server]]


def report(args: argparse.Namespace, rounds: dict[str, list[Times]], changed: dict[str, dict[str, int]],
           runtime: str, stdio_bytes: int, http_bytes: int, before: tuple[str, float],
           after: tuple[str, float]) -> str:
    from importlib.metadata import version

    n = args.queries * args.rounds
    lines = [
        f"## Per-call overhead against do-nothing servers (`.venv/bin/python bench/call_overhead.py"
        f"{' ' if sys.argv[1:] else ''}{' '.join(sys.argv[1:])}`, {time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"The first {args.docs:,} SciFact passages, embedded with {runtime} (`runtime: auto`); CPU flags: {cpu_flags()};"
        f" {os.cpu_count()} CPUs, shared. Over stdio the agent profile's `search` (top_k 5, the default) as"
        f" `retriever serve`; over HTTP `retriever deploy`'s POST /search (`query_list` of one query, top_k 5),"
        f" no token (loopback). {args.queries} SciFact test queries per kind, each sent to the three servers of a"
        f" transport in a rotating order, kinds alternating, {args.rounds} rounds with fresh servers: {n:,} timed calls"
        f" per server, kind and client (5 queries before each round's, not counted). Medians of all of them (ms),"
        f" and ours less the busy do-nothing server in each round. Replies: median {stdio_bytes:,} bytes (MCP"
        f" result) and {http_bytes:,} bytes (HTTP body). The SDK's client: mcp {version('mcp')}, protocol"
        f" {PROTOCOL}; httpx {version('httpx')}; uvicorn {version('uvicorn')}, starlette {version('starlette')}.",
        "",
        "Do-nothing, at once: a loop over stdin (stdio) or a bare Starlette app under the same uvicorn (HTTP) that"
        " parses the request, looks its arguments up and sends our recorded reply bytes. Do-nothing, busy: the same,"
        " after making the search's raw library calls in its own process (dense: the export's tokenizer and"
        f" {runtime.split()[0]} on the same graph, FAISS on our index file; BM25: bm25s over the same passages;"
        " top 5). Ours less the busy one is our own handling: the goal is at most +0.5 ms (issue 46).",
        "",
        "| client | kind | ours | do-nothing, at once | do-nothing, busy | ours less at once | **ours less busy**"
        " (each round) | +0.5 ms goal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for client in CLIENTS:
        for kind in KINDS:
            m = {s: med(pooled(rounds[client], kind, s)) for s in SERVERS}
            each = ", ".join(f"{over(r, kind):+.2f}" for r in rounds[client])
            lines.append(f"| {client} | {kind} | {m['ours']:.2f} | {m['instant']:.2f} | {m['busy']:.2f} |"
                         f" {m['ours'] - m['instant']:+.2f} | **{m['ours'] - m['busy']:+.2f}** ({each}) |"
                         f" {'met' if m['ours'] - m['busy'] <= 0.5 else 'not met'} |")
    checked = "; ".join(f"{c.split(',')[0]}: " + ", ".join(f"{s} {k}" for s, k in v.items()) for c, v in changed.items())
    lines += [
        "",
        f"Replies that differed from ours as recorded (bare client and httpx check every one): {checked}."
        f" Other benches running: at the start {before[0]} (load {before[1]:.2f}), at the end {after[0]}"
        f" (load {after[1]:.2f}).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
