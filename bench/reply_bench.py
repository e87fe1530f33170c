"""Large replies: this server against a trivial FastMCP server returning the same bytes, to the
same client (fastmcp's) in the same run; and a 6 MB result over streamable HTTP with the stock
client. Writes its section of bench/RESULTS.md.

    .venv/bin/python bench/reply_bench.py [--dense] [--queries 300] [--runs 3]

SciFact (5,183 passages), 300 test queries x top_k 100 with passages: about 45 MB of JSON.
BM25 is built in seconds; `--dense` also embeds the corpus (minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import scifact_queries, write_section

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCIFACT = ROOT / "data" / "scifact"
TRIVIAL = '''
import sys
from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp.types import TextContent
payload = open(sys.argv[1], encoding="utf-8").read()
mcp = FastMCP("trivial")

@mcp.tool(output_schema=None)
def same_bytes() -> ToolResult:
    return ToolResult(content=[TextContent(type="text", text=payload)])

mcp.run("stdio", show_banner=False)
'''


def sets(out: Path) -> list[str]:
    return ["--set", f"corpus_path={SCIFACT / 'corpus.jsonl'}", "--set", f"embedding_path={out / 'embedding.npy'}",
            "--set", f"index_backend_configs.faiss.index_path={out / 'faiss'}",
            "--set", f"backend_configs.bm25.save_path={out / 'bm25'}", "--set", f"docs_path={out / 'docs'}"]


async def call_stdio(command: list[str], tool: str, args: dict[str, Any], runs: int,
                     init: bool) -> tuple[list[float], str]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(command=command[0], args=command[1:], cwd=str(ROOT))
    times, text = [], ""
    async with Client(transport, timeout=900) as client:
        if init:
            await client.call_tool("retriever_init", {})
        for _ in range(runs):
            t = time.perf_counter()
            result = await client.call_tool(tool, args)
            times.append(time.perf_counter() - t)
            text = result.content[0].text
            json.loads(text)  # UltraRAG's reading of every reply
    return times, text


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dense", action="store_true")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    a = p.parse_args()
    out = ROOT / "bench" / "out" / "reply"
    mode = "all" if a.dense else "bm25"
    subprocess.run([str(BIN / "retriever"), "--log-level", "WARNING", "index", "--mode", mode, *sets(out)],
                   check=True, stdout=subprocess.DEVNULL)
    qs = scifact_queries(a.queries)
    ours = [str(BIN / "retriever"), "--log-level", "WARNING", "serve", "--tools", "full", *sets(out)]
    rows = []
    tools = ["bm25_search"] + (["retriever_search"] if a.dense else [])
    for tool in tools:
        args = {"query_list": qs, "top_k": 100, "max_bytes": 0}
        ours_t, text = asyncio.run(call_stdio(ours, tool, args, a.runs, init=True))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
            f.write(text)
        try:
            trivial_t, same = asyncio.run(call_stdio([sys.executable, "-c", TRIVIAL, f.name], "same_bytes", {},
                                                     a.runs, init=False))
        finally:
            os.unlink(f.name)
        assert same == text
        mo, mt = statistics.median(ours_t), statistics.median(trivial_t)
        rows.append(f"| `{tool}` {len(qs)} x 100, passages, over stdio | {len(text.encode()) / 1e6:.1f} MB | "
                    f"{mo:.2f} s | {mt:.2f} s | {mo / mt:.2f}x |")
    http = http_six_mb(out, qs)
    section = "\n".join([
        "## Large replies (`bench/reply_bench.py`, issue 16)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run, median of {a.runs}. Every reply's text is its JSON "
        "(what UltraRAG's client parses); a large reply is sent once, as text only. The trivial server is a "
        "FastMCP tool returning the same bytes as text, called by the same client (fastmcp `Client` over stdio).",
        "", "| call | reply | ours | trivial server, same bytes | ratio |", "|---|---|---|---|---|", *rows, "",
        f"- Over streamable HTTP with the stock client, a result of {http['unbounded_mb']:.1f} MB (`max_bytes=0`, "
        f"{http['queries']} queries x 100): a reply of {http['reply_bytes'] / 1e6:.2f} MB (the HTTP cap of "
        f"900,000 bytes of hits), `truncated` with next_offset {http['next_offset']}, no transport error; "
        f"with the default budget: {http['default_bytes'] / 1e3:.0f} kB."])
    write_section("reply_bench", section, a.out)
    print(section)


def unbounded_bytes(out: Path, qs: list[str]) -> int:
    """The complete result's JSON, in process (the same API call, no budget)."""
    from retriever.api import call
    from retriever.api.models import BM25SearchRequest
    from retriever.cli import parse_sets
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    engine = Retriever(load_config(ROOT / "parameter.yaml", parse_sets(sets(out)[1::2])), ROOT)
    engine.init()
    payload = call(engine, BM25SearchRequest(query_list=qs, top_k=100, max_bytes=0))
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def http_six_mb(out: Path, qs: list[str]) -> dict[str, Any]:
    """`retriever serve --transport http` on 127.0.0.1 and the stock client over streamable HTTP."""
    import socket

    from fastmcp import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(BIN / "retriever"), "--log-level", "WARNING", "serve", "--tools", "full", "--transport", "http",
                             "--port", str(port), "--init", *sets(out)], stderr=subprocess.DEVNULL)
    n = 40
    try:
        async def go() -> dict[str, Any]:
            for _ in range(600):
                try:
                    async with Client(f"http://127.0.0.1:{port}/mcp", timeout=600) as client:
                        full = await client.call_tool("bm25_search", {"query_list": qs[:n], "top_k": 100,
                                                                      "max_bytes": 0})
                        default = await client.call_tool("bm25_search", {"query_list": qs[:n], "top_k": 100})
                        ids = await client.call_tool("bm25_search", {"query_list": qs[:n], "top_k": 100,
                                                                     "return_text": False, "max_bytes": 0})
                        break
                except Exception:  # noqa: BLE001 - not up yet
                    await asyncio.sleep(0.2)
            body = json.loads(full.content[0].text)
            assert not ids.is_error
            return {"queries": n, "reply_bytes": len(full.content[0].text.encode()),
                    "unbounded_mb": unbounded_bytes(out, qs[:n]) / 1e6, "next_offset": body["truncated"]["next_offset"],
                    "default_bytes": len(default.content[0].text.encode())}

        return asyncio.run(go())
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
