"""Pure ranking helpers shared by every retriever."""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the `k` best scores, best first; equal scores in row order (deterministic)."""
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]
        above = np.flatnonzero(scores > kth)
        ties = np.flatnonzero(scores == kth)[: k - len(above)]
        rows = np.concatenate([above, ties])
    else:
        rows = np.arange(n)
    return rows[np.lexsort((rows, -scores[rows]))].astype(np.int64)
