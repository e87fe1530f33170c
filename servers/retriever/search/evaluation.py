"""IR metrics over BEIR files: nDCG@10, Recall@100, MRR@10 (trec_eval definitions), TREC run files
read as trec_eval reads them, and a paired significance test between two runs. Pure functions.

Checked against pytrec_eval (trec_eval's code), ir-measures and ranx on the same run files
(tests/test_eval.py): the same means to 4 decimals."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

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


MEASURES: dict[str, tuple[Callable[[Sequence[str], Mapping[str, int], int], float], int]] = {
    "ndcg@10": (ndcg_at, 10), "recall@100": (recall_at, 100), "mrr@10": (mrr_at, 10)}


def per_query(run: Run, qrels: Qrels, measure: str) -> np.ndarray:
    """`measure` for each query of `qrels`, in its order (a query missing from the run scores 0)."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {sorted(MEASURES)}, got {measure!r}")
    fn, k = MEASURES[measure]
    return np.array([fn([d for d, _ in run.get(qid, [])], rels, k) for qid, rels in qrels.items()])


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean metrics over the queries in `qrels` (a query missing from the run scores 0)."""
    means = {m: round(float(per_query(run, qrels, m).mean()), 4) if qrels else 0.0 for m in MEASURES}
    return means | {"queries": len(qrels)}


def read_trec_run(path: str | Path) -> Run:
    """A TREC run file (`qid Q0 doc rank score tag`), each query's documents ordered as trec_eval
    orders them: by score, high first, ties by document id, high first (the rank column is ignored)."""
    rows: dict[str, list[tuple[str, float]]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise ValueError(f"{path}:{line_no}: expected 'qid Q0 doc rank score tag', got {line.strip()!r}")
            try:
                rows.setdefault(parts[0], []).append((parts[2], float(parts[4])))
            except ValueError:
                raise ValueError(f"{path}:{line_no}: the score {parts[4]!r} is not a number") from None
    return {q: sorted(docs, key=lambda d: (d[1], d[0]), reverse=True) for q, docs in rows.items()}


def compare(a: Run, b: Run, qrels: Qrels, measure: str = "ndcg@10", permutations: int = 10_000,
            seed: int = 0) -> dict[str, float | int | str]:
    """Is run `b` better than run `a` on `measure`, beyond chance? A two-sided paired randomisation
    test (Fisher's, by sign flips of the per-query differences; Smucker et al., CIKM 2007) and the
    paired Student's t-test, over the queries of `qrels`."""
    from scipy.stats import ttest_rel

    x, y = per_query(a, qrels, measure), per_query(b, qrels, measure)
    diff = y - x
    rng = np.random.default_rng(seed)
    observed = abs(diff.mean())
    hits = 0
    for start in range(0, permutations, 1000):  # a thousand sign patterns at a time
        signs = rng.choice((-1.0, 1.0), size=(min(1000, permutations - start), len(diff)))
        hits += int((np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12).sum())
    t_p = float(ttest_rel(y, x).pvalue) if np.any(diff != diff[0]) else (1.0 if diff[0] == 0 else 0.0)
    return {"measure": measure, "queries": len(diff), "mean_a": round(float(x.mean()), 4),
            "mean_b": round(float(y.mean()), 4),
            "delta": round(float(diff.mean()), 4), "p_randomisation": round((hits + 1) / (permutations + 1), 4),
            "p_ttest": round(t_p, 4), "permutations": permutations, "better": int((diff > 0).sum()),
            "worse": int((diff < 0).sum())}


def write_trec_run(run: Run, path: str | Path, tag: str) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for qid, ranked in run.items():
            for rank, (doc, score) in enumerate(ranked, start=1):
                f.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
