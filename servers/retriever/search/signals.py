"""Per-query signals that move hybrid's dense prior before adaptive fusion (issue 32; chosen on the
development sets of bench/QUALITY.md, "issue 32").

The cross-check: where the collection's self-retrieval check trusts dense (a prior of at least
0.5: calibration.py), a query whose best BM25 document is one dense ranks far below its own best
(a cosine gap of `CROSS_TAU` or more) is one where BM25 matched the words of the wrong document
(a name whose words the right description does not hold, an entity query): BM25's prior goes down
linearly with that gap, to nothing at `CROSS_TAU`, and also with how much of the query's highest
possible BM25 score its best document reaches (its coverage, counted as at least a quarter). Where dense is not trusted (a prior
under 0.5: a corpus the model cannot read), nothing changes: there dense's cosines say nothing.
Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CROSS_TAU = 0.03  # the cosine gap at which BM25's prior reaches zero
TRUSTED = 0.5  # the dense prior from which the cross-check acts
COVERAGE_FLOOR = 0.25  # BM25's prior is scaled by its coverage of the query, at least by this


def cosine_of(row: int, rows: np.ndarray, scores: np.ndarray) -> float:
    """Dense's score of `row`: from its list, or below its last one where it is not in it."""
    where = np.flatnonzero(rows == row)
    return float(scores[where[0]]) if len(where) else float(scores[-1])


def checked_prior(prior: float, dense: tuple[np.ndarray, np.ndarray], bm25: tuple[np.ndarray, np.ndarray],
                  bound: float) -> float:
    """The dense prior for one query after the cross-check (see the module doc); `bound` is the
    query's highest possible BM25 score (0: unknown, coverage taken as 1)."""
    (d_rows, d_scores), (b_rows, b_scores) = dense, bm25
    if prior < TRUSTED or not len(d_rows) or not len(b_rows) or prior >= 1.0:
        return prior
    gap = max(0.0, float(d_scores[0]) - cosine_of(int(b_rows[0]), d_rows, d_scores))
    coverage = min(1.0, float(b_scores[0]) / bound) if bound > 0 else 1.0
    bm25_prior = (1.0 - prior) * max(0.0, 1.0 - gap / CROSS_TAU) * max(COVERAGE_FLOOR, coverage)
    return prior / (prior + bm25_prior) if prior + bm25_prior > 0 else 1.0


def checked_weights(weights: Sequence[float], dense: tuple[np.ndarray, np.ndarray],
                    bm25: tuple[np.ndarray, np.ndarray], bound: float) -> list[float]:
    """Hybrid's priors (dense first, the rest after it) with dense's moved by the cross-check and
    the others scaled to share what is left as they did."""
    total = float(sum(weights))
    if total <= 0:
        return list(weights)
    prior = float(weights[0]) / total
    moved = checked_prior(prior, dense, bm25, bound)
    rest = total - float(weights[0])
    scale = (1.0 - moved) / (rest / total) if rest > 0 else 0.0
    return [moved] + [float(w) / total * scale for w in weights[1:]]
