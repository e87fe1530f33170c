"""Pure ranking helpers shared by every retriever."""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the `k` best scores, best first; equal scores in row order (deterministic)."""
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k < n:  # the rows at or above the k-th best score: those above it and every tie with it
        rows = np.flatnonzero(scores >= np.partition(scores, n - k)[n - k])
    else:
        rows = np.arange(n)
    # a stable sort keeps the ascending rows of equal scores in row order; ties past k are cut
    return rows[np.argsort(-scores[rows], kind="stable")[:k]].astype(np.int64, copy=False)


def top_kept(scores: np.ndarray, keep: np.ndarray, allowed: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the top `k` scores among those kept (and allowed), and their scores; the top k
    is taken of the kept alone, in ascending order, so equal scores stay in row order."""
    if allowed is not None:
        keep &= allowed[: len(scores)]
    kept = np.flatnonzero(keep)
    found = scores[kept]
    top = top_k(found, k)
    return kept[top], found[top]
