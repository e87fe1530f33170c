"""Lean serving on SciFact (5,183 passages), the embedding runtimes side by side in one run:
start to first answer over stdio, the server's peak memory after 300 queries of each search
tool, the single-query overhead of MCP over stdio against the raw library calls (the same
runtime, the same FAISS and BM25 indexes), whether torch was loaded into the server, and SciFact
nDCG@10 through each runtime. Medians throughout. Writes bench/LEAN.md.

    .venv/bin/python bench/startup.py [--starts 5] [--queries 300] [--rounds 3] [--runtimes torch,onnx,openvino]
        [--server-python .cache/lean-venv/bin/python] [--section NAME]

The framework's floor beside ours: a bare FastMCP server with one trivial tool, over the same
stdio client, started and called the same way (start to first answer, one call's round trip);
and a server that does nothing (it answers every call with one of the tool's replies), called with
both clients: at once (what the pipes and the two ends' handling of a reply cost, whatever the
server), and busy as long as each runtime's raw call first (the overhead of a server whose only
work is the raw call's time: ours less it is what our server adds). That server marks when it read
each call and wrote its answer, which splits its round trip into the client's part and its own.
`--server-python` runs the servers (ours through that venv's `retriever`, and the floor) from
another venv, e.g. a serving install without torch (`pip install '.[openvino,onnx]'`); the indexes
and the raw library calls stay with this venv.

Each runtime gets its own indexes (bench/out/startup/<runtime>/, made by `retriever index` once
and reused); a first start per runtime, not counted, makes the export and OpenVINO's compiled blob
in the model cache. Starts are interleaved across runtimes so a busy machine slows all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from report import ROOT, SCIFACT, scifact_queries, write_section

BIN = Path(sys.executable).parent
OUT = ROOT / "bench" / "out" / "startup"
TOOLS = ("retriever_search", "bm25_search", "retriever_hybrid_search")
RUNTIMES = {"torch": "fp32", "onnx": "int8", "openvino": "auto"}  # auto: bf16 where the CPU has it


def sets(runtime: str, precision: str | None = None, out: Path | None = None) -> list[str]:
    """The --set pairs of a runtime's indexes (in `out`, default OUT/<runtime>) and precision."""
    out = OUT / runtime if out is None else out
    pairs = {"corpus_path": SCIFACT / "corpus.jsonl", "embedding_path": out / "embedding.npy",
             "docs_path": out / "docs", "index_backend_configs.faiss.index_path": out / "faiss",
             "backend_configs.bm25.save_path": out / "bm25",
             "backend_configs.sentence_transformers.runtime": runtime,
             "backend_configs.sentence_transformers.precision": precision or RUNTIMES[runtime]}
    return [x for k, v in pairs.items() for x in ("--set", f"{k}={v}")]


def build(runtime: str, precision: str | None = None, out: Path | None = None) -> None:
    """`retriever index` of the runtime's indexes, once: made before, they are reused."""
    out = OUT / runtime if out is None else out
    if (out / "faiss" / "manifest.json").exists() and (out / "bm25" / "manifest.json").exists():
        return
    print(f"{runtime} {precision or RUNTIMES[runtime]}: retriever index (once)...", file=sys.stderr)
    subprocess.run([str(BIN / "retriever"), "--log-level", "WARNING", "index", "--overwrite",
                    *sets(runtime, precision, out)], check=True, stdout=subprocess.DEVNULL)


def ndcg(runtime: str, mode: str, precision: str | None = None, out: Path | None = None,
         bin_dir: Path = BIN) -> float:
    """SciFact nDCG@10 of `retriever eval` (run from `bin_dir`'s venv) on the runtime's indexes."""
    proc = subprocess.run([str(bin_dir / "retriever"), "--log-level", "WARNING", "eval", *sets(runtime, precision, out),
                           "--mode", mode, "--queries", str(SCIFACT / "queries.jsonl"),
                           "--qrels", str(SCIFACT / "qrels" / "test.tsv"), "--json"],
                          check=True, capture_output=True, text=True, cwd=ROOT)
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["ndcg@10"])


# ---- the server over stdio ------------------------------------------------------------------

def server_pid() -> int:
    import psutil

    for child in psutil.Process().children(recursive=True):
        if "serve" in " ".join(child.cmdline()):
            return int(child.pid)
    raise RuntimeError("no `retriever serve` child")


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def torch_loaded(pid: int) -> bool:
    """Whether libtorch is mapped into the process (importing torch maps it)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


SERVER_BIN = BIN  # the venv whose `retriever` (and python) serve: --server-python

FLOOR = r"""
from fastmcp import FastMCP

mcp = FastMCP("floor")


@mcp.tool
def echo(text: str) -> str:
    return text


mcp.run("stdio", show_banner=False)
"""


def spans(call: Callable[[str], Any], queries: list[str]) -> list[tuple[float, float]]:
    """When each `call(q)` over `queries` began and ended (time.perf_counter: CLOCK_MONOTONIC, the
    same clock in every process of this machine, so a server's own marks fall between them)."""
    out = []
    for q in queries:
        t = time.perf_counter()
        call(q)
        out.append((t, time.perf_counter()))
    return out


async def aspans(call: Callable[[str], Awaitable[Any]], queries: list[str]) -> list[tuple[float, float]]:
    """The same for a coroutine function."""
    out = []
    for q in queries:
        t = time.perf_counter()
        await call(q)
        out.append((t, time.perf_counter()))
    return out


def median_ms(times: list[tuple[float, float]]) -> float:
    """The median of the spans, in ms."""
    return statistics.median(end - begin for begin, end in times) * 1000


async def floor(calls: int) -> dict[str, Any]:
    """The framework's floor: a bare FastMCP server with one trivial tool over stdio, the same
    client: start to its first answer and, with `calls`, the median round trip of one call."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=str(SERVER_BIN / "python"), args=["-c", FLOOR], cwd=str(ROOT))
    res: dict[str, Any] = {}
    t0 = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            first = await s.call_tool("echo", {"text": "what causes fever?"})
            res["first_s"] = time.perf_counter() - t0
            assert not first.is_error, first
            res["call_ms"] = (median_ms(await aspans(lambda q: s.call_tool("echo", {"text": q}),
                                                     ["what causes fever?"] * calls)) if calls else float("nan"))
    return res


CANNED = r"""
import json, os, sys, time
result, wait = json.loads(sys.argv[1]), float(sys.argv[2])  # one tools/call result; seconds to take
marks = open(sys.argv[3], "w")  # per call: when its line was read, when its answer was written
tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("bm25_search", "retriever_search")]
buffered = b""
while chunk := os.read(0, 1 << 16):
    read = time.perf_counter()
    buffered += chunk
    while b"\n" in buffered:
        line, buffered = buffered.split(b"\n", 1)
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message["method"]
        if method == "tools/call":  # busy, as a search computes: no sleep, whose wake-up a search has not
            end = time.perf_counter() + wait
            while time.perf_counter() < end:
                pass
        answer = ({"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "canned", "version": "1"}} if method == "initialize"
                  else {"tools": tools} if method == "tools/list" else result)
        data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}).encode() + b"\n"
        written = time.perf_counter()
        os.write(1, data)
        if method == "tools/call":
            marks.write(f"{read} {written}\n")
            marks.flush()
"""


def canned_args(result: dict[str, Any], wait_ms: float, marks: Path) -> list[str]:
    return [str(SERVER_BIN / "python"), "-c", CANNED, json.dumps(result), str(wait_ms / 1000), str(marks)]


def split(times: list[tuple[float, float]], marks: Path, wait_ms: float) -> dict[str, float]:
    """A do-nothing server's round trips (the client's spans, the server's marks), medians in ms:
    whole (less the wait), from the client's call to the server's read of it, the server's own
    handling (less the wait), from the server's write of the answer to the client's return."""
    served = [tuple(map(float, line.split())) for line in marks.read_text().splitlines()]
    assert len(served) == len(times), (len(served), len(times))

    def med(values: Any) -> float:
        return statistics.median(values) * 1000

    return {"ms": median_ms(times) - wait_ms, "to_server_ms": med(r - b for (b, _), (r, _) in zip(times, served)),
            "server_ms": med(w - r for r, w in served) - wait_ms,
            "to_client_ms": med(e - w for (_, e), (_, w) in zip(times, served))}


async def canned_sdk(tool: str, result: dict[str, Any], queries: list[str], wait_ms: float = 0.0) -> dict[str, float]:
    """The round trips, with the SDK's client, of a server that does nothing but take `wait_ms`
    (busy) on each call and answer it with `result` (one of the tool's replies): what the pipes and
    the two ends' handling of the reply add to a call of that length, whatever the server (split)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as devnull:
        command, *args = canned_args(result, wait_ms, Path(tmp) / "marks")
        params = StdioServerParameters(command=command, args=args, cwd=str(ROOT))
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await s.list_tools()  # as a client does; else the SDK's client asks at the first call
            times = await aspans(lambda q: s.call_tool(tool, {"query_list": [q], "top_k": 10}), queries)
        return split(times, Path(tmp) / "marks", wait_ms)


def canned_bare(tool: str, result: dict[str, Any], queries: list[str], wait_ms: float = 0.0) -> dict[str, float]:
    """The same server that does nothing, with the bare JSON-RPC client."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(canned_args(result, wait_ms, Path(tmp) / "marks"), cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        ask = bare_client(proc)
        times = spans(lambda q: ask("tools/call", {"name": tool, "arguments": {"query_list": [q], "top_k": 10}}),
                      queries)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
        return split(times, Path(tmp) / "marks", wait_ms)


def server_bin(runtime: str) -> Path:
    """The venv bin a runtime's server runs from: --server-python's, but torch's always this venv's
    (a lean venv has no torch to serve it with)."""
    return BIN if runtime == "torch" else SERVER_BIN


def server_venv(bin_dir: Path) -> str:
    """Which venv serves, and whether torch and numba are installed in it (numba: bm25s imports it
    whenever it is there; only the dev venv has it, for ranx)."""
    probe = "import importlib.util as u; print(' '.join(m for m in ('torch', 'numba') if u.find_spec(m)))"
    found = subprocess.run([str(bin_dir / "python"), "-c", probe], capture_output=True, text=True,
                           check=True).stdout.split()
    try:
        where = str(bin_dir.parent.relative_to(ROOT))
    except ValueError:
        where = str(bin_dir.parent)
    return f"`{where}` ({', '.join(found) + ' installed' if found else 'no torch, no numba'})"


async def session(runtime: str, queries: list[str] | None, raw: Raw | None = None) -> dict[str, Any]:
    """Spawn `retriever serve --init` over stdio; time the first answer; with `queries`, time each
    tool on them one query at a time (the raw call, where a tool has one, just before it) and read
    the server's peak memory."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=str(server_bin(runtime) / "retriever"), cwd=str(ROOT),
                                   args=["--log-level", "WARNING", "serve", "--init", "--tools", "full", *sets(runtime)])
    res: dict[str, Any] = {}
    t0 = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            res["initialized_s"] = time.perf_counter() - t0
            first = await s.call_tool("retriever_search", {"query_list": ["what causes fever?"], "top_k": 10})
            res["first_s"] = time.perf_counter() - t0
            assert not first.is_error, first
            pid = server_pid()
            res["torch"] = torch_loaded(pid)
            if queries:
                for tool in TOOLS:
                    lat, raws = [], []
                    for q in queries:
                        if raw is not None and tool in RAW_CALL:
                            raws.append(raw(RAW_CALL[tool], q))
                        t = time.perf_counter()
                        r = await s.call_tool(tool, {"query_list": [q], "top_k": 10})
                        lat.append(time.perf_counter() - t)
                        assert not r.is_error, r
                    res[f"{tool}_ms"] = statistics.median(lat) * 1000
                    if raws:
                        res[f"{tool}_raw_ms"] = statistics.median(raws) * 1000
                lat = []  # ids and scores only, as the raw bm25s call returns: the passages' bytes left out
                for q in queries:
                    t = time.perf_counter()
                    r = await s.call_tool("bm25_search", {"query_list": [q], "top_k": 10, "return_text": False})
                    lat.append(time.perf_counter() - t)
                    assert not r.is_error, r
                res["bm25_ids_ms"] = statistics.median(lat) * 1000
                res["peak_mb"] = vm_hwm_mb(pid)
                res["torch"] = torch_loaded(pid)
    return res


# ---- the raw library calls, each runtime in a process of its own ---------------------------

# the raw libraries as the server would call them (runtime, precision, model, export, graph, faiss_file,
# corpus set before it): `encode`, a FAISS `index` and a bm25s index `bm25` (also bench/call_overhead.py)
RAW_LIBRARIES = r"""
if runtime == "torch":
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(model, device="cpu")
    encode = lambda q: st.encode([q], normalize_embeddings=True)
else:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(Path(export) / "tokenizer.json"))
    tok.no_padding(); tok.enable_truncation(256)
    names = json.loads((Path(export) / "export.json").read_text())["inputs"]
    if runtime == "onnx":
        import onnxruntime as ort
        sess = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
        run = lambda feeds: sess.run(None, feeds)[0]
    else:
        import openvino as ov
        core = ov.Core(); core.set_property({"CACHE_DIR": str(Path(graph).parent / "openvino-cache")})
        hint = "bf16" if precision == "bf16" else "f32"
        req = core.compile_model(graph, "CPU",
                                 {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"}).create_infer_request()
        run = lambda feeds: req.infer(feeds)[0]
    def encode(q):
        ids = np.array([tok.encode(q).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        v = np.asarray(run({n: feeds[n] for n in names}), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)
index = faiss.read_index(faiss_file)
docs = [json.loads(line) for line in open(corpus)]
stemmer = Stemmer.Stemmer("english")
bm25 = bm25s.BM25(); bm25.index(bm25s.tokenize([" ".join(p for p in (d.get("title"), d.get("text")) if p) for d in docs],
                                              stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
"""

RAW = r"""
import json, sys, time
from pathlib import Path
import numpy as np, faiss, bm25s, Stemmer
runtime, precision, model, export, graph, faiss_file, corpus = json.loads(sys.argv[1])
""" + RAW_LIBRARIES + r"""
CALLS = {"dense": lambda q: index.search(encode(q), 10),
         "bm25": lambda q: bm25.retrieve(bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False),
                                         k=10, show_progress=False)}
print("ready", flush=True)
for line in sys.stdin:  # {"call": "dense" | "bm25", "query": ...} -> the call's own time in seconds
    ask = json.loads(line)
    t = time.perf_counter(); CALLS[ask["call"]](ask["query"]); took = time.perf_counter() - t
    print(json.dumps(took), flush=True)
"""


class Raw:
    """The raw library calls of one runtime in a process of their own, asked one query at a time
    between the server's calls, so both are timed in the same moments of a busy machine."""

    def __init__(self, runtime: str) -> None:
        from retriever.config import load_config
        from retriever.embedders.exported import exported, openvino_ir

        cfg = load_config(ROOT / "parameter.yaml")
        manifest = json.loads((OUT / runtime / "faiss" / "manifest.json").read_text())
        precision = manifest["runtime"].split()[-1]  # what the server ran: auto resolved
        export = graph = ""
        if runtime != "torch":  # the export and the graph the server runs, found as exported.py finds them
            export = str(exported(cfg))
            folder = exported(cfg, precision if runtime == "onnx" else "fp32")
            graph = str(openvino_ir(folder, "MiniLM") / "model.xml" if runtime == "openvino" else folder / "model.onnx")
        args = [runtime, precision, cfg.resolved_model(), export, graph,
                str(OUT / runtime / "faiss" / manifest["data"]), str(SCIFACT / "corpus.jsonl")]
        self.proc = subprocess.Popen([sys.executable, "-c", RAW, json.dumps(args)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def __call__(self, call: str, query: str) -> float:
        """The raw call's own time, in seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"call": call, "query": query}) + "\n")
        self.proc.stdin.flush()
        return float(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


RAW_CALL = {"retriever_search": "dense", "bm25_search": "bm25"}  # the tools with a raw call beside them


def bare(runtime: str, queries: list[str], raw: Raw) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """The same single queries through a bare JSON-RPC client (newline-delimited JSON over the
    pipes, no MCP SDK): what the server adds, without the SDK client's own parsing and validation;
    and per tool, its first result (what the server that does nothing sends back)."""
    proc = subprocess.Popen([str(server_bin(runtime) / "retriever"), "--log-level", "WARNING", "serve", "--init", "--tools",
                             "full", *sets(runtime)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    ask = bare_client(proc)
    out: dict[str, float] = {}
    replies: dict[str, dict[str, Any]] = {}
    for tool, call in RAW_CALL.items():
        replies[tool] = ask("tools/call", {"name": tool, "arguments": {"query_list": [queries[0]], "top_k": 10}})["result"]
        lat, raws = [], []
        for q in queries:
            raws.append(raw(call, q))
            t = time.perf_counter()
            r = ask("tools/call", {"name": tool, "arguments": {"query_list": [q], "top_k": 10}})
            lat.append(time.perf_counter() - t)
            assert not r["result"]["isError"], r
        out[f"{tool}_ms"], out[f"{tool}_raw_ms"] = statistics.median(lat) * 1000, statistics.median(raws) * 1000
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait()
    return out, replies


def bare_client(proc: subprocess.Popen[bytes]) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """`ask(method, params)` -> the response, over `proc`'s pipes as newline-delimited JSON-RPC,
    after the `initialize` handshake."""
    assert proc.stdin is not None and proc.stdout is not None
    send, receive = proc.stdin, proc.stdout
    ids = iter(range(1, 1 << 30))

    def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(ids)
        send.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        send.flush()
        while (message := json.loads(receive.readline())).get("id") != rid:
            pass
        return dict(message)

    ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    return ask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=5, help="timed starts per runtime (median reported)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="query sessions per runtime (the median round reported)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--no-quality", action="store_true", help="skip the nDCG@10 evals")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "LEAN.md")
    ap.add_argument("--server-python", type=Path, help="serve from this venv's python (and its `retriever`)")
    ap.add_argument("--section", default="lean serving", help="the section of --out to write")
    args = ap.parse_args()
    global SERVER_BIN
    if args.server_python is not None:
        SERVER_BIN = Path(os.path.abspath(args.server_python)).parent  # the venv's bin, links not followed
    runtimes = args.runtimes.split(",")
    queries = scifact_queries(args.queries)
    for rt in runtimes:
        build(rt)
        asyncio.run(session(rt, None))  # not counted: the export and compiled blobs made once
    asyncio.run(floor(0))  # not counted: warms the file cache as the first starts above did
    starts: dict[str, list[dict[str, Any]]] = {rt: [] for rt in [*runtimes, FLOOR_KEY]}
    for i in range(args.starts):
        for rt in runtimes:
            starts[rt].append(asyncio.run(session(rt, None)))
            print(f"start {i + 1}/{args.starts} {rt}: {starts[rt][-1]['first_s']:.2f} s", file=sys.stderr)
        starts[FLOOR_KEY].append(asyncio.run(floor(0)))
        print(f"start {i + 1}/{args.starts} floor: {starts[FLOOR_KEY][-1]['first_s']:.2f} s", file=sys.stderr)
    rounds: dict[str, list[dict[str, Any]]] = {rt: [] for rt in runtimes}
    bare_rounds: dict[str, list[dict[str, float]]] = {rt: [] for rt in runtimes}
    replies: dict[str, dict[str, Any]] = {}  # per tool, the first result: what the server that does nothing sends
    for i in range(args.rounds):  # a fresh server per round, runtimes interleaved: one busy moment hits all
        for rt in runtimes:
            raw = Raw(rt)
            rounds[rt].append(asyncio.run(session(rt, queries, raw)))
            measured, first = bare(rt, queries, raw)
            bare_rounds[rt].append(measured)
            replies = replies or first
            raw.close()
            print(f"round {i + 1}/{args.rounds} {rt}: dense overhead "
                  f"{rounds[rt][-1]['retriever_search_ms'] - rounds[rt][-1]['retriever_search_raw_ms']:+.2f} ms",
                  file=sys.stderr)
    long = {rt: merged(rounds[rt]) for rt in runtimes}
    bares = {rt: merged(bare_rounds[rt]) for rt in runtimes}
    long[FLOOR_KEY] = asyncio.run(floor(len(queries)))
    reply = replies["bm25_search"]
    long[FLOOR_KEY]["canned_sdk"] = asyncio.run(canned_sdk("bm25_search", reply, queries))
    long[FLOOR_KEY]["canned_bare"] = canned_bare("bm25_search", reply, queries)
    long[FLOOR_KEY]["canned_bytes"] = len(json.dumps(reply))
    for rt in runtimes:  # the server that does nothing, busy as long as each raw call (each client's own median)
        for tool in RAW_CALL:
            wait = long[rt][f"{tool}_raw_ms"]
            long[rt][f"{tool}_floor"] = asyncio.run(canned_sdk(tool, replies[tool], queries, wait))
            wait = bares[rt][f"{tool}_raw_ms"]
            bares[rt][f"{tool}_floor"] = canned_bare(tool, replies[tool], queries, wait)
    quality = {} if args.no_quality else {(rt, m): ndcg(rt, m) for rt in runtimes for m in ("dense", "hybrid")}
    labels = {rt: json.loads((OUT / rt / "faiss" / "manifest.json").read_text())["runtime"] for rt in runtimes}
    write(args.out, runtimes, labels, starts, long, bares, quality, len(queries), args.section, args.rounds)


FLOOR_KEY = "floor"


def merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one runtime as one: each time the median over rounds, each overhead (`<tool>_over_ms`)
    the median of the rounds' own (stdio minus raw, both medians of that round), peak memory the
    highest, torch loaded if it was in any."""
    out: dict[str, Any] = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k.endswith("_ms")}
    for key in [k for k in rounds[0] if k.endswith("_raw_ms")]:
        tool = key.removesuffix("_raw_ms")
        out[f"{tool}_over_ms"] = statistics.median(r[f"{tool}_ms"] - r[key] for r in rounds)
        out[f"{tool}_rounds"] = [r[f"{tool}_ms"] - r[key] for r in rounds]
    if "bm25_ids_ms" in rounds[0]:
        out["bm25_ids_over_ms"] = statistics.median(r["bm25_ids_ms"] - r["bm25_search_raw_ms"] for r in rounds)
    if "peak_mb" in rounds[0]:
        out["peak_mb"] = max(r["peak_mb"] for r in rounds)
        out["torch"] = any(r["torch"] for r in rounds)
    return out


def write(out: Path, runtimes: list[str], labels: dict[str, str], starts: dict[str, list[dict[str, Any]]],
          long: dict[str, dict[str, Any]], bares: dict[str, dict[str, float]],
          quality: dict[tuple[str, str], float], n: int, section: str = "lean serving", rounds: int = 1) -> None:
    def med(rt: str, key: str) -> float:
        return statistics.median(s[key] for s in starts[rt])

    def row(name: str, cells: list[str]) -> str:
        return f"| {name} | " + " | ".join(cells) + " |"

    cols = [labels[rt] for rt in runtimes]
    lines = [
        f"## {section[0].upper() + section[1:]}: start-up, memory and overhead by runtime"
        f" (`{' '.join(['bench/startup.py', *sys.argv[1:]])}`, {time.strftime('%Y-%m-%d')})",
        "",
        f"SciFact (5,183 passages), {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}),"
        f" `retriever serve --init` over stdio with the standard MCP client; medians of {len(starts[runtimes[0]])}"
        f" starts per runtime (interleaved), {n} single queries per tool (top_k=10) in each of {rounds} rounds (a"
        " fresh server each, runtimes interleaved). Raw: the same runtime's"
        " library calls (sentence-transformers, or tokenizers + onnxruntime / OpenVINO on the same export) and"
        " FAISS on the server's own index file, bm25s built in process as in bench/run.py, in a process of their"
        " own, each timed around the library call alone, just before the server's call on the same query (so"
        " both meet the same moments of a busy machine). The bare client: newline-delimited JSON-RPC over the"
        " same pipes, without the MCP SDK's parsing and validation of each message."
        " The servers ran from " + "; ".join(f"{labels[rt]}: {server_venv(server_bin(rt))}" for rt in runtimes)
        + f"; the floor from {server_venv(SERVER_BIN)}.",
        "",
        row("", cols),
        row("---", ["---"] * len(cols)),
        row("start to `initialize` answered", [f"{med(rt, 'initialized_s'):.2f} s" for rt in runtimes]),
        row("start to first answer (goal <= 1.5 s)", [f"**{med(rt, 'first_s'):.2f} s**" for rt in runtimes]),
        row(f"server peak RSS after {n} queries x 3 tools (goal <= 400 MB lean)",
            [f"**{long[rt]['peak_mb']:.0f} MB**" for rt in runtimes]),
        row("torch loaded in the server", ["yes" if long[rt]["torch"] or any(s["torch"] for s in starts[rt]) else "no"
                                           for rt in runtimes]),
    ]
    def over(d: dict[str, Any], tool: str) -> str:
        each = f" ({', '.join(f'{x:+.2f}' for x in d[f'{tool}_rounds'])})" if rounds > 1 else ""
        return f"{d[f'{tool}_ms']:.1f} / {d[f'{tool}_raw_ms']:.1f} / **{d[f'{tool}_over_ms']:+.2f} ms**{each}"

    for tool in RAW_CALL:
        lines.append(row(f"{tool}: stdio / raw / overhead, median of rounds (each round) (goal <= +2 ms)",
                         [over(long[rt], tool) for rt in runtimes]))
    lines.append(row("bm25_search return_text=false (ids and scores, as raw): stdio / raw / overhead",
                     [f"{long[rt]['bm25_ids_ms']:.1f} / {long[rt]['bm25_search_raw_ms']:.1f} /"
                      f" **{long[rt]['bm25_ids_over_ms']:+.2f} ms**" for rt in runtimes]))
    for tool in RAW_CALL:
        lines.append(row(f"{tool} with a bare JSON-RPC client (no MCP SDK): stdio / raw / overhead (each round)",
                         [over(bares[rt], tool) for rt in runtimes]))
    def parts(d: dict[str, float]) -> str:
        return f"{d['to_server_ms']:.2f} / {d['server_ms']:.2f} / {d['to_client_ms']:.2f}"

    for tool in RAW_CALL:
        lines.append(row(f"{tool}: a server that does nothing, busy as long as the raw call, then sends this tool's"
                         " reply: its overhead, the SDK's client / the bare client",
                         [f"{long[rt][f'{tool}_floor']['ms']:+.2f} / {bares[rt][f'{tool}_floor']['ms']:+.2f} ms"
                          for rt in runtimes]))
        for d, client in ((long, "the SDK's client"), (bares, "the bare client")):
            lines.append(row(f"{tool}: that overhead with {client}, split: the client's call to the server's read of"
                             " it / the server's own handling / the server's write to the client's return",
                             [f"{parts(d[rt][f'{tool}_floor'])} ms" for rt in runtimes]))
        lines.append(row(f"{tool}: ours over that server (our overhead less its), the SDK's client / the bare client",
                         [f"**{long[rt][f'{tool}_over_ms'] - long[rt][f'{tool}_floor']['ms']:+.2f} /"
                          f" {bares[rt][f'{tool}_over_ms'] - bares[rt][f'{tool}_floor']['ms']:+.2f} ms**"
                          for rt in runtimes]))
    lines.append(row("retriever_hybrid_search over stdio", [f"{long[rt]['retriever_hybrid_search_ms']:.1f} ms"
                                                            for rt in runtimes]))
    if quality:
        for mode in ("dense", "hybrid"):
            lines.append(row(f"SciFact nDCG@10, {mode} (`retriever eval`)",
                             [f"{quality[rt, mode]:.4f}" for rt in runtimes]))
    fl = long[FLOOR_KEY]["call_ms"]
    first = {k: statistics.median(s["first_s"] for s in starts[k]) for k in (*runtimes, FLOOR_KEY)}
    lines += [
        "",
        "The framework's floor: a bare FastMCP server (the installed fastmcp) with one trivial tool (`echo`), over"
        " the same stdio client, started the same way (interleaved with the starts above):",
        "",
        "|  | start to first answer | one call's round trip |",
        "| --- | --- | --- |",
        f"| bare FastMCP, one trivial tool | {first[FLOOR_KEY]:.2f} s"
        f" | {fl:.2f} ms |",
        f"| a server that does nothing: every call answered at once with one bm25_search reply"
        f" ({long[FLOOR_KEY]['canned_bytes']:,} bytes), the SDK's client / the bare client | |"
        f" {long[FLOOR_KEY]['canned_sdk']['ms']:.2f} / {long[FLOOR_KEY]['canned_bare']['ms']:.2f} ms |",
        f"| the same, split: the client's call to the server's read of it / the server's own handling / the"
        f" server's write to the client's return, the SDK's client; the bare client | |"
        f" {parts(long[FLOOR_KEY]['canned_sdk'])}; {parts(long[FLOOR_KEY]['canned_bare'])} ms |",
        "",
        "A server that does nothing (a loop over its stdin, in the serving venv's Python) is what the pipes and"
        " the two ends' handling of a reply cost here, whatever the server. In the table above the same server is"
        " busy as long as each raw call (its median in that runtime's sessions) before it answers: the overhead of"
        " a server whose only work is the raw call's time, with each client on this machine. Its split comes from"
        " marks: the server notes when it read each call and wrote its answer, on the clock the client times with"
        " (time.perf_counter, CLOCK_MONOTONIC, one clock for all processes here); the client's parts include each"
        " end's wake-up and the pipe.",
        "",
        "Our stdio server (servers/retriever/mcp/stdio.py) imports no MCP framework; the bare FastMCP server is"
        " what a FastMCP stdio server costs with nothing in it. Ours against it, start to first answer (ours with"
        " its indexes and model loaded): "
        + ", ".join(f"{labels[rt]} **{first[rt] / first[FLOOR_KEY]:.2f}x**" for rt in runtimes)
        + f"; a whole bm25_search round trip (the search included) against its trivial call's {fl:.2f} ms: "
        + ", ".join(f"{labels[rt]} **{long[rt]['bm25_search_ms'] / fl:.2f}x**" for rt in runtimes) + ".",
    ]
    write_section(section, "\n".join(lines), out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
