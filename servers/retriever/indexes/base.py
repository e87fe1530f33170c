"""The contract every vector index meets: rows in, (rows, scores) out."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np


class VectorIndex(Protocol):
    dimension: int
    manifest: dict[str, Any]

    def __len__(self) -> int: ...

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Best first: rows (n, k') int64 and scores (n, k') float32, k' = min(k, candidates);
        `allowed`, a boolean mask over rows, limits the candidates (exactly, not post-filtered)."""
        ...

    def with_vectors(self, vectors: np.ndarray) -> VectorIndex:
        """A new index with `vectors` appended as the next rows; this one is unchanged."""
        ...

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        """Publish atomically with `manifest` (model, dimension, count, corpus fingerprint)."""
        ...
