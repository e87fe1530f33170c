"""Tune hybrid fusion on the SciFact TRAIN split (never on test), then report test once.

Dense and BM25 rankings are computed once, 1000 deep, for train and test queries; each setting
is then fused with the same pure functions the server uses. Writes bench/HYBRID_TUNING.md.

    .venv/bin/python bench/tune_hybrid.py   (needs the SciFact indexes: `make eval-scifact`)
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / "data" / "scifact"
INDEX = ROOT / "index" / "scifact"


def main() -> None:
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever
    from retriever.search.evaluation import evaluate, load_qrels, load_queries
    from retriever.search.fusion import fuse

    overrides = {
        "corpus_path": str(SCIFACT / "corpus.jsonl"), "embedding_path": str(INDEX / "embedding.npy"),
        "index_backend_configs": {"faiss": {"index_path": str(INDEX / "faiss")}},
        "backend_configs": {"bm25": {"save_path": str(INDEX / "bm25")}},
    }
    engine = Retriever(load_config(ROOT / "parameter.yaml", overrides), ROOT)
    engine.init()
    queries = load_queries(SCIFACT / "queries.jsonl")
    splits = {name: load_qrels(SCIFACT / "qrels" / f"{name}.tsv") for name in ("train", "test")}
    runs = {}
    for name, qrels in splits.items():
        qids = list(qrels)
        texts = [queries[q] for q in qids]
        dense = engine.search(texts, 1000, mode="dense")
        bm25 = engine.bm25_search(texts, 1000)
        runs[name] = {q: ([(h.id, h.score) for h in d], [(h.id, h.score) for h in b]) for q, d, b in zip(qids, dense, bm25)}

    def score(split: str, method: str, depth: int, k: float, vw: float) -> dict:
        run = {q: fuse(method, [d[:depth], b[:depth]], [vw, 1 - vw], k)[:100] for q, (d, b) in runs[split].items()}
        return evaluate(run, splits[split])

    rows = []
    depths = (100, 200, 500, 1000)
    grid = [("rrf", d, k, w) for d, k, w in itertools.product(depths, (10, 30, 60, 100), (0.3, 0.4, 0.5, 0.6, 0.7))]
    grid += [("convex", d, 0, w) for d, w in itertools.product(depths, (0.3, 0.4, 0.5, 0.6, 0.7))]
    for setting in grid:
        rows.append((setting, score("train", *setting)))
    # The two targets weigh equally: rank by train nDCG@10 + Recall@100.
    rows.sort(key=lambda r: (-(r[1]["ndcg@10"] + r[1]["recall@100"]), -r[1]["ndcg@10"]))
    best = rows[0][0]
    default = ("rrf", 1000, 60, 0.5)  # the shipped default before issue 17 (now adaptive: bench/QUALITY.md)
    by_depth = [(d, score("train", "rrf", d, 60, 0.5)) for d in depths]
    lines = [
        "# Hybrid fusion tuned on SciFact train (809 queries), reported once on test (300)",
        "",
        "The RRF and convex settings of issue 4. The default is now `adaptive` fusion with `vector_weight` auto,",
        "chosen over three development sets: bench/QUALITY.md (issue 17).",
        "",
        "Produced by `python bench/tune_hybrid.py`. Dense: all-MiniLM-L6-v2 + FAISS exact; BM25: bm25s (defaults).",
        "Settings are ranked by train nDCG@10 + Recall@100 (the two targets, equally). Test is computed only for the",
        "default and for the best train setting.",
        "",
        "RRF k=60, equal weights (the reference method), by candidate depth, on train:",
        "",
        "| candidate_depth | train nDCG@10 | train R@100 |",
        "|---|---|---|",
        *[f"| {d} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |" for d, m in by_depth],
        "",
        "All settings, best 12 on train:",
        "",
        "| setting (fusion, depth, rrf_k, vector_weight) | train nDCG@10 | train R@100 |",
        "|---|---|---|",
        *[f"| {s} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |" for s, m in rows[:12]],
        "",
        "| on test | nDCG@10 | R@100 | MRR@10 |",
        "|---|---|---|---|",
    ]
    for label, setting in (("default " + str(default), default), ("best on train " + str(best), best)):
        m = score("test", *setting)
        lines.append(f"| {label} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {m['mrr@10']:.4f} |")
    out = ROOT / "bench" / "HYBRID_TUNING.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text(), file=sys.stderr)


if __name__ == "__main__":
    main()
