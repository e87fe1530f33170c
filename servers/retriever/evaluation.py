"""IR metrics over BEIR files: nDCG@10, Recall@100, MRR@10 (trec_eval definitions). Pure functions."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[tuple[str, float]]]


def load_qrels(path: str | Path) -> Qrels:
    """BEIR qrels: tab-separated `query-id corpus-id score` with a header line."""
    qrels: Qrels = {}
    with Path(path).open(encoding="utf-8") as f:
        rows = csv.reader(f, delimiter="\t")
        header = next(rows, None)
        if header is None or len(header) < 3:
            raise ValueError(f"{path}: expected a header 'query-id corpus-id score'")
        for line, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise ValueError(f"{path}:{line}: expected 3 tab-separated columns, got {row!r}")
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


def load_queries(path: str | Path) -> dict[str, str]:
    """BEIR queries JSONL `{"_id", "text"}` (or `{"id", "contents"}`)."""
    out: dict[str, str] = {}
    with Path(path).open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                out[str(rec.get("_id", rec.get("id")))] = rec.get("text", rec.get("contents"))
            except (json.JSONDecodeError, AttributeError) as e:
                raise ValueError(f"{path}:{line_no}: not a query record ({e})") from None
    return out


def ndcg_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if rels.get(d, 0) > 0), 0.0)


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean metrics over the queries in `qrels` (a query missing from the run scores 0)."""
    totals = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for qid, rels in qrels.items():
        ranked = [d for d, _ in run.get(qid, [])]
        totals["ndcg@10"] += ndcg_at(ranked, rels, 10)
        totals["recall@100"] += recall_at(ranked, rels, 100)
        totals["mrr@10"] += mrr_at(ranked, rels, 10)
    n = max(len(qrels), 1)
    return {k: round(v / n, 4) for k, v in totals.items()} | {"queries": len(qrels)}


def write_trec_run(run: Run, path: str | Path, tag: str) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for qid, ranked in run.items():
            for rank, (doc, score) in enumerate(ranked, start=1):
                f.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
