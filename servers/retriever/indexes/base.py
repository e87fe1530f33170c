"""The contract every vector index meets: rows in, (rows, scores) out, and changes applied."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..filters import Filter
from ..types import Document


@dataclass(frozen=True)
class Change:
    """One change of a collection, as its change log records it (collection.py)."""

    added: Sequence[Document]  # appended as the next rows, in order
    vectors: np.ndarray | None  # their vectors (None without an embedder)
    deleted: Sequence[str]  # ids no longer live anywhere (a replaced id is not among them)
    row_of: Mapping[str, int]  # id -> live row after the change
    generation: int  # the change log's generation after the change


class VectorIndex(Protocol):
    dimension: int
    manifest: dict[str, Any]
    warnings: list[str]

    def __len__(self) -> int: ...

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None,
               f: Filter | None = None) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray]]:
        """Per query, rows (int64) and scores best first, at most k. The candidates are limited
        exactly (not post-filtered) by `allowed`, a boolean mask over rows (the filter and the
        live rows), or by the filter `f` where the backend evaluates filters itself."""
        ...

    def apply(self, change: Change) -> VectorIndex:
        """The index after `change`: a new snapshot; searches holding this one are undisturbed."""
        ...
