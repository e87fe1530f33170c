"""Sentence-level retrieval on SciFact (issue 13): the abstracts split into sentences (the
`chunking` section, by sentence, one per chunk), searched at sentence level 1,000 deep, then
merged back to documents by their best sentence (max-passage); document-level nDCG@10 and
Recall@100 against searching whole abstracts, dense, BM25 and hybrid; and the latency of a
one-query search with a window of one sentence each side against none. Writes its section of
bench/RESULTS.md.

    .venv/bin/python bench/chunk_bench.py

Needs the whole-abstract SciFact indexes under index/scifact (`make eval-scifact`); builds the
sentence indexes under bench/out/chunks (minutes: every sentence is embedded).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from report import ROOT, SCIFACT, write_section

BIN = Path(sys.executable).parent
OUT = ROOT / "bench" / "out" / "chunks"
WHOLE = ROOT / "index" / "scifact"


def sets(out: Path, chunked: bool) -> list[str]:
    s = [f"corpus_path={SCIFACT / 'corpus.jsonl'}", f"embedding_path={out / 'embedding.npy'}",
         f"index_backend_configs.faiss.index_path={out / 'faiss'}", f"backend_configs.bm25.save_path={out / 'bm25'}",
         f"docs_path={out / 'docs'}"]
    return s + (["chunking.by=sentence", "chunking.length=1"] if chunked else [])


def engine(out: Path, chunked: bool) -> Any:
    from retriever.cli import parse_sets
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    e = Retriever(load_config(ROOT / "parameter.yaml", parse_sets(sets(out, chunked))), ROOT)
    e.init()
    return e


def max_passage(hits: list[Any], k: int) -> list[tuple[str, float]]:
    """Documents in the order of their best sentence."""
    best: dict[str, float] = {}
    for h in hits:
        doc = h.metadata.get("source_id", h.id)
        if doc not in best:
            best[doc] = h.score
    return list(best.items())[:k]


def main() -> None:
    from retriever.api import call
    from retriever.api.models import DeploySearchRequest
    from retriever.search.evaluation import evaluate, load_qrels, load_queries

    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    subprocess.run([str(BIN / "retriever"), "--log-level", "WARNING", "index", "--config", str(ROOT / "parameter.yaml"),
                    *[a for s in sets(OUT, True) for a in ("--set", s)]], check=True, stdout=subprocess.DEVNULL)
    build = time.perf_counter() - t
    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    texts = load_queries(SCIFACT / "queries.jsonl")
    qids = list(qrels)
    queries = [texts[q] for q in qids]
    chunked, whole = engine(OUT, True), engine(WHOLE, False)
    rows = []
    for mode in ("bm25", "dense", "hybrid"):
        metrics = {}
        for name, e, depth in (("whole abstracts", whole, 100), ("sentences, max-passage", chunked, 1000)):
            search = {"bm25": e.bm25_search, "dense": e.search, "hybrid": e.hybrid_search}[mode]
            results = search(queries, depth)
            run = {q: max_passage(hits, 100) for q, hits in zip(qids, results)}
            metrics[name] = evaluate(run, qrels)
        rows += [f"| {mode} | {name} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |" for name, m in metrics.items()]
    latency = []
    for window in (0, 1):
        times = []
        for q in queries:
            request = DeploySearchRequest(query_list=[q], top_k=10, mode="bm25", window=window).as_search()
            s = time.perf_counter()
            call(chunked, request)
            times.append(time.perf_counter() - s)
        cuts = statistics.quantiles(times, n=20)
        latency.append(f"| {window} | {statistics.median(times) * 1000:.2f} | {cuts[18] * 1000:.2f} |")
    body = "\n".join([
        "## Sentence-level retrieval (`bench/chunk_bench.py`, issue 13)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run. SciFact's {len(chunked.docs)} sentences (from 5,183 "
        f"abstracts; chunking by sentence, one per chunk; index build {build:.0f} s) searched 1,000 deep and merged to "
        "documents by their best sentence, against the whole abstracts (`make eval-scifact`'s indexes); 300 test "
        "queries, document-level metrics.", "",
        "| mode | unit | nDCG@10 | Recall@100 |", "|---|---|---|---|", *rows, "",
        "One-query BM25 search over the sentences, top 10, reply built, with the sentence before and after each hit "
        "merged in (window 1) or not:", "", "| window | p50 ms | p95 ms |", "|---|---|---|", *latency])
    write_section("chunk_bench", body)
    print(body)


if __name__ == "__main__":
    main()
