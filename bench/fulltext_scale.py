"""Milvus full_text at scale, on Milvus Lite, beside the local FAISS + bm25s engine: N synthetic
documents of bench/scale.py (bench/synth.py's corpus, its queries and qrels, the static model).

For each N, in this process, one engine per side over the same corpus, vectors and queries:

- local: `retriever index` (both modes) builds the embedding file, FAISS Flat and bm25s's index
  (reused from bench/out/scale/N/ when bench/scale.py left them there);
- full_text: `index_backend: milvus`, `full_text: true` (analyzer bm25s, the default) in a Milvus
  Lite database of its own; retriever_index's path writes the documents with the embedding file's
  vectors (no second embedding) and Milvus fills the BM25 field: the insert rate is documents over
  that whole call, flush included;
- one query at a time (`--queries`, synth's queries): BM25 and hybrid (and dense) median and p95
  ms, then nDCG@10 and recall@10 against synth's qrels (one relevant document a query: the one
  its words were drawn from).

    nice -n 10 .venv/bin/python bench/fulltext_scale.py 100000 [--queries 200]

Writes the "fulltext-scale" section of bench/RESULTS.md (and of docs/past-one-machine.md) and prints it to stderr.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from report import write_section
from scale import BIN, project

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "past-one-machine.md"

OUT = ROOT / "bench" / "out" / "fulltext_scale"
MODES = ("bm25", "hybrid", "dense")


def local_built(config: Path) -> float:
    """The local embedding file, FAISS and bm25s indexes, built unless bench/scale.py left them; seconds."""
    out = config.parent / "out"
    if (out / "embedding.npy").exists() and (out / "bm25").exists() and (out / "faiss").exists():
        return 0.0
    t = time.perf_counter()
    subprocess.run([str(BIN / "retriever"), "--log-level", "warning", "index", "--config", str(config)], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def full_text_project(config: Path, n: int) -> Path:
    """The same corpus and embedding file, index_backend milvus with full_text, in OUT/n."""
    folder = OUT / str(n)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cfg = yaml.safe_load(config.read_text())
    cfg["corpus_path"] = str(config.parent / "corpus.jsonl")
    cfg["embedding_path"] = str(config.parent / "out" / "embedding.npy")
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = {"uri": str(folder / "milvus.db"), "full_text": True,
                                              "index_chunk_size": 2000}
    cfg["collection_name"] = ""  # the default collection: embedding_path gives its vectors
    path = folder / "parameter.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def searched(engine: Any, queries: dict[str, str], qrels: Any) -> dict[str, dict[str, float]]:
    """Per mode: p50 and p95 ms of one query at a time, nDCG@10 and recall@10."""
    from retriever.search.evaluation import evaluate

    calls = {"bm25": engine.bm25_search, "hybrid": engine.hybrid_search, "dense": engine.search}
    out = {}
    for mode in MODES:
        times, run = [], {}
        for qid, text in queries.items():
            t = time.perf_counter()
            hits = calls[mode]([text], 10)[0]
            times.append(time.perf_counter() - t)
            run[qid] = [(h.id, h.score) for h in hits]
        metrics = evaluate(run, {q: qrels[q] for q in queries})
        out[mode] = {"p50": statistics.median(times) * 1000, "p95": float(np.percentile(times, 95)) * 1000,
                     "ndcg": metrics["ndcg@10"], "recall": metrics["recall@100"]}  # of 10 hits: recall@10
        print(f"  {mode}: {out[mode]}", file=sys.stderr, flush=True)
    return out


def run(n: int, n_queries: int) -> list[str]:
    from retriever.config import load_config
    from retriever.engine import Retriever
    from retriever.search.evaluation import load_qrels, load_queries

    config = project(n)
    built_s = local_built(config)
    qrels = load_qrels(config.parent / "queries.qrels.tsv")
    queries = dict(list(load_queries(config.parent / "queries.jsonl").items())[:n_queries])

    local = Retriever(load_config(config), config.parent)
    local.init()
    print(f"{n:,}: local FAISS Flat + bm25s", file=sys.stderr, flush=True)
    figures = {"local": searched(local, queries, qrels)}
    del local

    ft_config = full_text_project(config, n)
    engine = Retriever(load_config(ft_config), ft_config.parent)
    engine.init()
    t = time.perf_counter()
    report = engine.index(overwrite=True)
    insert_s = time.perf_counter() - t
    print(f"{n:,}: full_text indexed {report['documents']:,} in {insert_s:.0f} s", file=sys.stderr, flush=True)
    figures["full_text"] = searched(engine, queries, qrels)
    import milvus_lite

    rows = []
    for mode in MODES:
        a, b = figures["local"][mode], figures["full_text"][mode]
        rows.append(f"| {mode} | {a['p50']:.1f} / {a['p95']:.1f} | {b['p50']:.1f} / {b['p95']:.1f} | "
                    f"{a['ndcg']:.4f} / {a['recall']:.3f} | {b['ndcg']:.4f} / {b['recall']:.3f} |")
    return [
        f"### {n:,} documents",
        "",
        f"Insert into Milvus Lite {milvus_lite.__version__} through retriever_index's path (the documents with the "
        f"embedding file's vectors, {2000:,} rows a call, Milvus's BM25 function filling the sparse field, the "
        f"closing flush): {insert_s:.0f} s, {report['documents'] / insert_s:,.0f} documents/s. "
        + (f"The local indexes took {built_s:.0f} s (`retriever index`, embedding included)." if built_s else
           "The local indexes (bench/out/scale/N/out) were built before this run, not timed here."),
        "",
        "| mode | local p50 / p95 ms | full_text p50 / p95 ms | local nDCG@10 / recall@10 | "
        "full_text nDCG@10 / recall@10 |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--queries", type=int, default=200)
    args = p.parse_args()
    parts = []
    for n in args.sizes:
        parts += run(n, args.queries)
    body = [
        f"Produced by `nice -n 10 .venv/bin/python bench/fulltext_scale.py {' '.join(map(str, args.sizes))}` on the "
        f"shared 2-core machine, {time.strftime('%Y-%m-%d')}: bench/synth.py's corpus and queries (the static model, "
        f"as bench/scale.py), {args.queries} queries one at a time, k 10, through the engine (the code the tools "
        "run); local is FAISS Flat + bm25s, full_text is Milvus Lite holding documents, vectors and BM25 "
        "(full_text_analyzer bm25s, hybrid adaptive).",
        "",
        *parts,
    ]
    section = "## Milvus full_text at scale (Milvus Lite, issue 29)\n\n" + "\n".join(body)
    write_section("fulltext-scale", section)
    if DOC.exists():  # docs/past-one-machine.md shows the same figures
        write_section("fulltext-scale", section, DOC)
    print("\n".join(body), file=sys.stderr)


if __name__ == "__main__":
    main()
