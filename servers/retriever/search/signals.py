"""Per-query signals that move hybrid's dense prior before adaptive fusion (issue 32; chosen on the
development sets of bench/QUALITY.md, "issue 32").

The cross-check: where the collection's self-retrieval check trusts dense (a prior of at least
0.5: calibration.py), a query whose best BM25 document is one dense ranks far below its own best
(a cosine gap of `CROSS_TAU` or more) is one where BM25 matched the words of the wrong document
(a name whose words the right description does not hold, an entity query): BM25's prior goes down
linearly with that gap, to nothing at `CROSS_TAU`, and also with how much of the query's highest
possible BM25 score its best document reaches (its coverage, counted as at least a quarter). Where dense is not trusted (a prior
under 0.5: a corpus the model cannot read), nothing changes: there dense's cosines say nothing.

The query gate (on by default): one query cannot tell a name BM25 matched in the wrong document
from a claim whose relevant abstract dense ranks low, but the collection's queries together can.
Each hybrid query's cross gap goes into its collection's window (the last `GATE_WINDOW`); once
`GATE_WARM` are in and their median is `GATE_GAP` or more (BM25's best is usually a document
dense ranks well below its own: short name-like queries over descriptions), and dense is trusted,
a query whose BM25 best reaches under `GATE_COVERAGE` of its bound (no strong exact match) is
answered in dense's order. The window lives in memory with the collection's session
(session.Learned: a restart, or the collection loaded anew, warms it again), one per caller: a
second token's queries once moved a victim's SciFact nDCG@10 from 0.7331 to 0.6487 through a
shared window.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

import numpy as np

from ..compute import CALLER
from ..session import Session

CROSS_TAU = 0.03  # the cosine gap at which BM25's prior reaches zero
TRUSTED = 0.5  # the dense prior from which the cross-check acts
COVERAGE_FLOOR = 0.25  # BM25's prior is scaled by its coverage of the query, at least by this
GATE_GAP = 0.05  # the median cross gap of the recent queries from which the gate opens
GATE_WINDOW = 200  # how many recent queries that median is over
GATE_WARM = 20  # how many queries the window needs before it can open
GATE_COVERAGE = 0.7  # a query whose BM25 best reaches this share of its bound keeps the fusion


def cosine_of(row: int, rows: np.ndarray, scores: np.ndarray) -> float:
    """Dense's score of `row`: from its list, or below its last one where it is not in it."""
    where = np.flatnonzero(rows == row)
    return float(scores[where[0]]) if len(where) else float(scores[-1])


def cross_gap(dense: tuple[np.ndarray, np.ndarray], bm25: tuple[np.ndarray, np.ndarray]) -> float:
    """Dense's best cosine minus its cosine of BM25's best document (0 where a list is empty)."""
    (d_rows, d_scores), (b_rows, _) = dense, bm25
    if not len(d_rows) or not len(b_rows):
        return 0.0
    return max(0.0, float(d_scores[0]) - cosine_of(int(b_rows[0]), d_rows, d_scores))


def coverage_of(bm25: tuple[np.ndarray, np.ndarray], bound: float) -> float:
    """How much of the query's highest possible BM25 score its best document reaches (1: unknown)."""
    _, b_scores = bm25
    if bound <= 0:
        return 1.0
    return min(1.0, float(b_scores[0]) / bound) if len(b_scores) else 0.0


def checked_prior(prior: float, dense: tuple[np.ndarray, np.ndarray], bm25: tuple[np.ndarray, np.ndarray],
                  bound: float) -> float:
    """The dense prior for one query after the cross-check (see the module doc); `bound` is the
    query's highest possible BM25 score (0: unknown, coverage taken as 1)."""
    (d_rows, _), (b_rows, _) = dense, bm25
    if prior < TRUSTED or not len(d_rows) or not len(b_rows) or prior >= 1.0:
        return prior
    gap, coverage = cross_gap(dense, bm25), coverage_of(bm25, bound)
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


class QueryGate:
    """One collection's recent cross gaps and the verdict they give (see the module doc).
    Thread-safe: an HTTP server's clients share it."""

    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=GATE_WINDOW)
        self._lock = threading.Lock()

    def is_open(self) -> bool:
        with self._lock:
            return len(self._gaps) >= GATE_WARM and float(np.median(self._gaps)) >= GATE_GAP

    def weigh(self, weights: Sequence[float], dense: tuple[np.ndarray, np.ndarray],
              bm25: tuple[np.ndarray, np.ndarray], bound: float) -> list[float] | None:
        """Dense alone (its prior 1, the others 0) where the gate, as the queries before this one
        left it, is open and this query's lists allow it; None to keep the fusion. This query's
        gap then joins the window."""
        total = float(sum(weights))
        trusted = total > 0 and float(weights[0]) / total >= TRUSTED
        lean = (trusted and self.is_open() and len(dense[0]) > 0
                and coverage_of(bm25, bound) < GATE_COVERAGE)
        if len(dense[0]) and len(bm25[0]):
            with self._lock:
                self._gaps.append(cross_gap(dense, bm25))
        return [1.0] + [0.0] * (len(weights) - 1) if lean else None


MAX_GATES = 1024  # callers' gates kept per collection; the least recently used goes first


def gate_for(s: Session, seen: str | None = None) -> QueryGate:
    """The query gate of session `s`'s collection (kept with the session: session.Learned) for
    this caller (compute.CALLER: one caller's queries cannot open the gate for another's), made on
    its first hybrid query. A restricted caller (`seen`: the key of what it sees, session.seen_key) has
    a gate of its own per visibility rule, fed only by its own queries over what it sees (no gap
    measured with hidden documents)."""
    learned, key = s.learned, CALLER.get() if seen is None else f"{CALLER.get()}\x00{seen}"
    with learned.gates_lock:
        gate = learned.gates.pop(key, None) or QueryGate()
        learned.gates[key] = gate
        while len(learned.gates) > MAX_GATES:
            learned.gates.popitem(last=False)
        return gate
