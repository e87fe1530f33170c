"""FAISS ANN choices on SciFact's real queries: recall@10 against exact, and test nDCG@10, per
index_factory and search setting. Needs the SciFact embedding (`make eval-scifact`).

    .venv/bin/python bench/ann_scifact.py

Writes the "ann-scifact" section of bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from report import SCIFACT, write_section
from scale import recall_at_10, timed_index

ROOT = Path(__file__).resolve().parents[1]

CHOICES = [("Flat", {}), ("HNSW32", {"efSearch": 16}), ("HNSW32", {"efSearch": 64}), ("HNSW32", {"efSearch": 256}),
           ("IVF256,Flat", {"nprobe": 8}), ("IVF256,Flat", {"nprobe": 32}), ("IVF256,PQ48", {"nprobe": 32})]


def main() -> None:
    from retriever.config import load_config
    from retriever.embedders import build_embedder
    from retriever.search.evaluation import evaluate, load_qrels, load_queries

    vectors = np.load(ROOT / "index" / "scifact" / "embedding.npy", mmap_mode="r")
    ids = [line.split('"_id": "')[1].split('"')[0] for line in (SCIFACT / "corpus.jsonl").read_text().splitlines()]
    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    queries = load_queries(SCIFACT / "queries.jsonl")
    qids = list(qrels)
    qvecs = build_embedder(load_config(ROOT / "parameter.yaml")).encode_queries([queries[q] for q in qids], "")
    exact = None
    rows = []
    for factory, tuning in CHOICES:
        _, found, scores, build, qps = timed_index(vectors, qvecs, factory, tuning, 100)
        if exact is None:
            exact = found
        recall = recall_at_10(found, exact)
        run = {q: [(ids[r], float(s)) for r, s in zip(rs, ss) if r >= 0] for q, rs, ss in zip(qids, found, scores)}
        m = evaluate(run, qrels)
        rows.append(f"| {factory} {tuning or ''} | {build:.2f} | {qps:.0f} | {recall:.3f} | {m['ndcg@10']:.4f} | "
                    f"{m['recall@100']:.4f} |")
    body = "\n".join([
        "## FAISS ANN on SciFact (real queries)", "",
        "Produced by `.venv/bin/python bench/ann_scifact.py`: 5,183 SciFact passages (all-MiniLM-L6-v2), the 300 test "
        "queries in one batch; recall@10 against Flat (exact).", "",
        "| index_factory (search setting) | build s | queries/s | recall@10 vs exact | nDCG@10 | Recall@100 |",
        "|---|---|---|---|---|---|", *rows])
    write_section("ann-scifact", body)
    print(body, file=sys.stderr)


if __name__ == "__main__":
    main()
