"""Where one bm25_search call's time goes besides bm25s, in process (no stdio): the MCP server
and a bare FastMCP server with one trivial tool, each called through FastMCP's in-memory client,
and the parts of ours called alone. CPU time of the whole process (every thread), medians of
`--queries` calls, the cases interleaved for `--rounds` rounds and the lowest median kept, so
other work on a shared machine counts as little as it can. Writes a section of bench/LEAN.md.

    .venv/bin/python bench/mcp_overhead.py [--queries 300] [--rounds 4]

Uses bench/startup.py's onnx BM25 index (bench/out/startup/onnx/bm25: run bench/startup.py once
first), opened with backend bm25 (no embedding model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from report import ROOT, SCIFACT, scifact_queries, write_section

OUT = ROOT / "bench" / "out" / "startup" / "onnx"


def engine() -> Any:
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    sets = {"corpus_path": str(SCIFACT / "corpus.jsonl"), "docs_path": str(OUT / "docs"), "backend": "bm25",
            "embedding_path": str(OUT / "embedding.npy"), "backend_configs": {"bm25": {"save_path": str(OUT / "bm25")}},
            "index_backend_configs": {"faiss": {"index_path": str(OUT / "faiss")}}}
    e = Retriever(load_config(ROOT / "parameter.yaml", sets), ROOT)
    e.init()
    return e


async def per_call(server: Any, tool: str, arguments: Callable[[str], dict[str, Any]], queries: list[str]) -> float:
    """Median CPU milliseconds of one call through FastMCP's in-memory client."""
    from fastmcp import Client

    async with Client(server) as client:
        await client.call_tool(tool, arguments(queries[0]))
        lat = []
        for q in queries:
            t = time.process_time()
            await client.call_tool(tool, arguments(q))
            lat.append(time.process_time() - t)
    return statistics.median(lat) * 1000


def alone(fn: Callable[[], Any], n: int) -> float:
    """CPU milliseconds of one `fn()`, the best of 5 repeats of `n`."""
    fn()
    return min(timeit.repeat(fn, number=n, repeat=5, timer=time.process_time)) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "LEAN.md")
    args = ap.parse_args()
    import retriever.mcp.serving as tools
    from fastmcp import FastMCP
    from retriever.api.calls import search
    from retriever.api.models import BM25SearchRequest
    from retriever.api.replies import TEXT_COPY_LIMIT, reply
    from retriever.mcp.server import build_server

    e = engine()
    queries = scifact_queries(args.queries)
    ours = build_server(e, profile="full")
    no_mw = build_server(e, profile="full")
    no_mw.middleware = [m for m in no_mw.middleware if type(m).__name__ != "ToolErrors"]
    floor = FastMCP("floor")

    @floor.tool
    def echo(text: str) -> str:
        return text

    threaded = tools.run

    async def inline(name: str, fn: Callable[..., Any], /, *a: Any) -> Any:
        return fn(*a)

    def bm25(**extra: Any) -> Callable[[str], dict[str, Any]]:
        return lambda q: {"query_list": [q], "top_k": 10, **extra}

    cases: dict[str, tuple[Any, str, Callable[[str], dict[str, Any]], bool]] = {
        "bare FastMCP, one trivial tool (`echo`)": (floor, "echo", lambda q: {"text": q}, False),
        "ours: bm25_search": (ours, "bm25_search", bm25(), False),
        "ours: bm25_search return_text=false": (ours, "bm25_search", bm25(return_text=False), False),
        "ours: bm25_search without the ToolErrors middleware": (no_mw, "bm25_search", bm25(), False),
        "ours: bm25_search on the event loop (no worker thread)": (ours, "bm25_search", bm25(), True),
    }
    got: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, (server, tool, arguments, on_loop) in cases.items():
            tools.run = inline if on_loop else threaded  # type: ignore[assignment]
            got[name].append(asyncio.run(per_call(server, tool, arguments, queries)))
    tools.run = threaded
    q = queries[1]
    request = BM25SearchRequest.model_validate({"query_list": [q], "top_k": 10})
    payload = search(e, request)
    parts = {
        "engine.bm25_search (tokenize, bm25s, hits)": alone(lambda: e.bm25_search([q], 10), args.queries),
        "api calls.search (the engine + the reply's shape)": alone(lambda: search(e, request), args.queries),
        "BM25SearchRequest.model_validate": alone(lambda: BM25SearchRequest.model_validate(
            {"query_list": [q], "top_k": 10}), 2000),
        "the middleware's size check (json.dumps of the arguments)": alone(lambda: json.dumps(
            {"query_list": [q], "top_k": 10}, default=str), 2000),
        "reply(): the payload as JSON text": alone(lambda: reply(payload), 2000),
    }
    text_bytes = len(reply(payload)[0].encode())
    lines = [
        f"## One bm25_search call split up, in process (bench/mcp_overhead.py, {time.strftime('%Y-%m-%d')})",
        "",
        f"FastMCP's in-memory client (no stdio), SciFact BM25, top_k=10. CPU time of the process (every thread),"
        f" lowest of {args.rounds} interleaved medians of {len(queries)} calls each.",
        "",
        "| call through the in-memory client | CPU per call |",
        "| --- | --- |",
        *[f"| {name} | {min(v):.2f} ms |" for name, v in got.items()],
        "",
        "| a part of ours alone | CPU per call |",
        "| --- | --- |",
        *[f"| {name} | {ms:.3f} ms |" for name, ms in parts.items()],
        "",
        f"A top-10 reply's JSON text is {text_bytes:,} bytes; under {TEXT_COPY_LIMIT:,} bytes it would travel a second"
        " time as structuredContent (api/replies.py).",
    ]
    write_section("mcp overhead", "\n".join(lines), args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
