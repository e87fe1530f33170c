"""`retriever run pipelines/scifact_eval.yaml` (our tools in process) against the same steps through
the MCP client over stdio (`retriever serve`: retriever_init, retriever_search of the 300 judged
queries 100 deep, whole reply, metrics computed by the caller), in one run. Writes its section
of bench/RESULTS.md.

    .venv/bin/python bench/pipeline_bench.py [--runs 3]

Needs the SciFact dense index under index/scifact (`make eval-scifact`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from report import ROOT, SCIFACT, write_section

BIN = Path(sys.executable).parent
OUT = ROOT / "index" / "scifact"
SETS = [f"corpus_path={SCIFACT / 'corpus.jsonl'}", f"embedding_path={OUT / 'embedding.npy'}",
        f"index_backend_configs.faiss.index_path={OUT / 'faiss'}", f"backend_configs.bm25.save_path={OUT / 'bm25'}"]


def pipeline_run() -> tuple[float, dict[str, float]]:
    """The command, in a fresh process as a user runs it."""
    out = ROOT / "pipelines" / "output" / "bench.json"
    t = time.perf_counter()
    subprocess.run([str(BIN / "retriever"), "--log-level", "WARNING", "run", "pipelines/scifact_eval.yaml", "--output",
                    str(out)], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t, json.loads(out.read_text())["variables"]["metrics"]


async def mcp_run() -> tuple[float, dict[str, float]]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    from retriever.search.evaluation import evaluate, load_qrels, load_queries

    t = time.perf_counter()
    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    queries = load_queries(SCIFACT / "queries.jsonl")
    qids = list(qrels)
    args = ["--log-level", "WARNING", "serve", "--tools", "full", *[a for s in SETS for a in ("--set", s)]]
    async with Client(StdioTransport(str(BIN / "retriever"), args, cwd=str(ROOT))) as client:
        await client.call_tool("retriever_init", {})
        result = await client.call_tool("retriever_search", {"query_list": [queries[q] for q in qids], "top_k": 100,
                                                             "max_bytes": 0})
        reply = json.loads(result.content[0].text)
    run = {q: list(zip(ids, scores)) for q, ids, scores in zip(qids, reply["ret_ids"], reply["ret_scores"])}
    return time.perf_counter() - t, evaluate(run, qrels)


def eval_run() -> dict[str, float]:
    """`retriever eval --mode dense` on the same index, 100 deep: the figures the other two must equal."""
    args = [str(BIN / "retriever"), "--log-level", "WARNING", "eval", *[a for s in SETS for a in ("--set", s)],
            "--queries", str(SCIFACT / "queries.jsonl"), "--qrels", str(SCIFACT / "qrels" / "test.tsv"),
            "--mode", "dense", "-k", "100", "--json"]
    done = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    ours, theirs = [], []
    keys = ("ndcg@10", "recall@100", "mrr@10")
    for _ in range(a.runs):
        seconds, metrics = pipeline_run()
        ours.append(seconds)
        mseconds, mmetrics = asyncio.run(mcp_run())
        theirs.append(mseconds)
        assert all(metrics[k] == mmetrics[k] for k in keys), (metrics, mmetrics)
    po, pm = statistics.median(ours), statistics.median(theirs)
    direct = eval_run()
    same = "equal" if all(metrics[k] == direct[k] for k in keys) else "not equal"
    body = "\n".join([
        "## Pipelines (`bench/pipeline_bench.py`, issue 12)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run, median of {a.runs}: SciFact's 300 judged queries, dense "
        "search 100 deep, metrics. Both are fresh processes and include loading the libraries, the model and "
        "the index; over MCP the 300 x 100 hits travel as one JSON reply of about 45 MB.", "",
        "| how | seconds | nDCG@10 | Recall@100 | MRR@10 |", "|---|---|---|---|---|",
        f"| `retriever run pipelines/scifact_eval.yaml` (tools in process) | {po:.2f} | {metrics['ndcg@10']} | "
        f"{metrics['recall@100']} | {metrics['mrr@10']} |",
        f"| the same steps through the MCP client over stdio (`retriever serve`) | {pm:.2f} | {mmetrics['ndcg@10']} | "
        f"{mmetrics['recall@100']} | {mmetrics['mrr@10']} |", "",
        f"The pipeline takes {po / pm:.2f}x the time of the MCP round trip; the metrics are equal, and {same} "
        f"to `retriever eval --mode dense` on the same index ({' / '.join(str(direct[k]) for k in keys)})."])
    write_section("pipeline_bench", body)
    print(body)


if __name__ == "__main__":
    main()
