"""The contract every vector index meets: rows in, (rows, scores) out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..filters import Filter


class VectorIndex(Protocol):
    dimension: int
    manifest: dict[str, Any]

    def __len__(self) -> int: ...

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None,
               f: Filter | None = None) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray]]:
        """Per query, rows (int64) and scores best first, at most k. The candidates are limited
        exactly (not post-filtered) by `allowed`, a boolean mask over rows (the filter and the
        live rows), or by the filter `f` where the backend evaluates filters itself."""
        ...

    def with_vectors(self, vectors: np.ndarray) -> VectorIndex:
        """A new index with `vectors` appended as the next rows; this one is unchanged."""
        ...

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        """Publish atomically with `manifest` (model, dimension, count, corpus fingerprint)."""
        ...
