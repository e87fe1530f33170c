"""Our own Python per search call, warm and without the model: the stdio server's `search` (the agent
profile, as `retriever serve` serves it) driven in process, one JSON-RPC line at a time, with the
embedder's model run replaced by its output recorded for the same query (so what is timed is ours:
the protocol, the checks, the validation, the tokenizer, the FAISS or BM25 search, the hits and the
reply), against the raw library calls' own part of the same search (dense: the tokenizer, the norm
and FAISS on our index, the model's output recorded as well; BM25: bm25s over the same passages).
A whole call's time swings with the model's run and the machine (bench/LEAN.md call-overhead);
this part does not, so a change to our path shows here to a few percent.

    .venv/bin/python bench/call_warm.py [--before REV] [--rounds 5] [--queries 300] [--write]

With `--before REV`, that commit's servers/ (a git worktree under bench/out/call_warm/) is measured
too, in its own processes, the two alternating (`--rounds` processes each); `--write` writes
section `call-warm` of bench/LEAN.md. The corpus is call_overhead.py's (the first 1,000 SciFact
passages, built once there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from report import ROOT, checkout, write_section

OUT = ROOT / "bench" / "out" / "call_warm"
LEAN = ROOT / "bench" / "LEAN.md"

ONE = r"""
import asyncio, json, sys, time, statistics
from pathlib import Path
import numpy as np, bm25s, Stemmer
from retriever.config import load_config
from retriever.engine.retriever import Retriever
from retriever.embedders import exported
from retriever.mcp.core import served_tools
from retriever.mcp.stdio import StdioServer

config, queries, mode = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
engine = Retriever(load_config(config)); engine.init()
tools = served_tools(engine, read_only=None, ultrarag=False, profile="agent", include=None, exclude=None)

class Out:
    def __init__(self): self.lines = []
    def write(self, b): self.lines.append(b)
    def flush(self): pass

out = Out()
server = StdioServer(engine, tools, out)
recorded, run = {}, exported.OpenVinoSession.__call__
def replay(self, feeds):  # the model's output for these tokens, from its first run
    key = feeds["input_ids"].tobytes()
    if key not in recorded:
        recorded[key] = run(self, feeds)
    return recorded[key].copy()
exported.OpenVinoSession.__call__ = replay

async def call(i, q):
    line = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "search", "arguments": {"query": q, "mode": mode}}}).encode()
    n = len(out.lines)
    await server.handle(line)
    while len(out.lines) == n:
        await asyncio.sleep(0)
    assert b'"isError":true' not in out.lines[-1], out.lines[-1][:300]

s = engine.session
tokenizer, index, vectors = s.embedder._tokenizer._fast, s.dense._index, {}
stemmer = Stemmer.Stemmer("english")
docs = [json.loads(line) for line in open(config.parent / "corpus.jsonl")]
bm25 = bm25s.BM25()
bm25.index(bm25s.tokenize([" ".join(p for p in (d.get("title"), d.get("text")) if p) for d in docs],
                          stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

def raw(q):
    if mode == "bm25":
        return bm25.retrieve(bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False), k=5,
                             show_progress=False)
    ids = np.array([tokenizer.encode(q).ids], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    v = vectors[q].copy()
    return index.search(v / np.linalg.norm(v, axis=1, keepdims=True), 5)

async def main():
    await server.handle(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}).encode())
    for q in queries:  # the model's outputs recorded, everything warm
        await call(0, q)
        vectors[q] = s.embedder.encode_queries([q], "")
        raw(q)
    ours, library = [], []
    for _ in range(3):
        for i, q in enumerate(queries):
            t = time.perf_counter(); await call(i + 1, q); ours.append(time.perf_counter() - t)
            t = time.perf_counter(); raw(q); library.append(time.perf_counter() - t)
    print(json.dumps({"ours": statistics.median(ours), "raw": statistics.median(library)}))

asyncio.run(main())
"""


def measure(servers: Path, config: Path, queries: list[str], mode: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", ONE, str(config), json.dumps(queries), mode], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(servers)}, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"call_warm: the measuring process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="a commit to measure too (its servers/, a git worktree)")
    parser.add_argument("--rounds", type=int, default=5, help="processes per side and kind")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--write", action="store_true", help="write section call-warm of bench/LEAN.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from call_overhead import project
    from report import scifact_queries

    config = project(1000)
    queries = scifact_queries(args.queries)
    OUT.mkdir(parents=True, exist_ok=True)
    sides = {"now": ROOT / "servers"}
    if args.before:
        sides = {"before": checkout(args.before, OUT), **sides}
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for mode in ("dense", "bm25"):
            for side, servers in (sides.items() if r % 2 == 0 else reversed(sides.items())):
                got.setdefault((side, mode), []).append(measure(servers, config, queries, mode))
                print(f"round {r + 1} {mode} {side}: {got[(side, mode)][-1]}", file=sys.stderr)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip()
    lines = [f"## Our own Python per search call, warm, the model's run replayed (`.venv/bin/python bench/call_warm.py"
             f"{' --before ' + args.before if args.before else ''}`)", "",
             f"The stdio server's agent `search` driven in process, {len(queries)} SciFact test queries x 3 per process,"
             f" {args.rounds} processes per side and kind (medians of each process's median, ms); `now` is HEAD {head} and"
             " the working tree. Raw: the library calls' own part of the same search (dense: tokenizer, norm and FAISS,"
             " the model's output replayed as well; BM25: bm25s). Ours less raw is our own Python per call, warm; a"
             " live call pays it several times over (caches cold after the model's run: bench/LEAN.md call-spans).", "",
             "| side | kind | ours | raw | ours less raw |", "| --- | --- | --- | --- | --- |"]
    for (side, mode), runs in got.items():
        o = statistics.median(m["ours"] for m in runs) * 1e3
        w = statistics.median(m["raw"] for m in runs) * 1e3
        lines.append(f"| {side} | {mode} | {o:.3f} | {w:.3f} | {o - w:+.3f} |")
    print("\n".join(lines))
    if args.write:
        write_section("call-warm", "\n".join(lines), LEAN)


if __name__ == "__main__":
    main()
