"""Hybrid search latency over stdio: the default fusion against the one it replaced (issue 17).

One `retriever serve` over stdio with the SciFact indexes (`make eval-scifact`), the standard MCP
client (mcp.ClientSession + stdio_client), the 300 SciFact test queries one at a time, top_k 10,
each query asked both ways in turn (adaptive at depth 500, the default now; rrf at depth 1000,
the default before) so drift on this shared machine hits both alike. Writes the
"hybrid-latency" section of bench/QUALITY.md.

    .venv/bin/python bench/hybrid_latency.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from report import scifact_queries, write_section

ROOT = Path(__file__).resolve().parents[1]

BIN = Path(sys.executable).parent
INDEX = ROOT / "index" / "scifact"
SETTINGS = {"adaptive, depth 500 (default now)": {"fusion": "adaptive", "candidate_depth": 500},
            "rrf k 60, depth 1000 (default before)": {"fusion": "rrf", "candidate_depth": 1000}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    sets = ["--set", f"corpus_path={ROOT / 'data' / 'scifact' / 'corpus.jsonl'}",
            "--set", f"embedding_path={INDEX / 'embedding.npy'}", "--set", f"docs_path={INDEX / 'docs'}",
            "--set", f"index_backend_configs.faiss.index_path={INDEX / 'faiss'}",
            "--set", f"backend_configs.bm25.save_path={INDEX / 'bm25'}"]
    params = StdioServerParameters(command=str(BIN / "retriever"), args=["--log-level", "WARNING", "serve", "--tools", "full", *sets],
                                   cwd=str(ROOT))
    queries = scifact_queries(300)
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}

    async def go() -> None:
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("retriever_init", {})
                    for extra in SETTINGS.values():  # warm both
                        await session.call_tool("retriever_hybrid_search", {"query_list": [queries[0]], **extra})
                    for r in range(args.rounds):
                        for i, q in enumerate(queries):
                            order = list(SETTINGS.items())
                            if (i + r) % 2:
                                order.reverse()
                            for name, extra in order:
                                t = time.perf_counter()
                                out = await session.call_tool("retriever_hybrid_search",
                                                              {"query_list": [q], "top_k": 10, **extra})
                                times[name].append(time.perf_counter() - t)
                                assert not out.is_error, out

    asyncio.run(go())
    rows = []
    base = statistics.median(times["rrf k 60, depth 1000 (default before)"])
    for name, xs in times.items():
        p50, p95 = statistics.median(xs) * 1000, float(np.percentile(xs, 95)) * 1000
        rows.append(f"| {name} | {p50:.1f} | {p95:.1f} | {statistics.median(xs) / base:.2f}x |")
    body = [f"Produced by `.venv/bin/python bench/hybrid_latency.py --rounds {args.rounds}`: `retriever serve` over "
            f"stdio, SciFact (5,183 documents, MiniLM, FAISS Flat, BM25), {len(queries)} test queries x "
            f"{args.rounds} rounds, one query a call, top_k 10, the two settings alternating query by query.",
            "", "| hybrid setting | p50 ms | p95 ms | p50 against before |", "|---|---|---|---|", *rows, ""]
    write_section("hybrid-latency", "## Hybrid latency over stdio\n\n" + "\n".join(body),
                  out=ROOT / "bench" / "QUALITY.md")
    print("\n".join(body), file=sys.stderr)


if __name__ == "__main__":
    main()
