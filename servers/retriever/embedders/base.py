"""The contract every embedding backend meets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    model_id: str
    """A stable name of the model, recorded in manifests (not a machine-specific path)."""
    dimension: int
    warnings: list[str]
    """Fallbacks taken so far (a missing prompt name, no GPU); shown in tool results."""

    def encode_queries(self, texts: Sequence[str], instruction: str) -> np.ndarray:
        """float32 (len(texts), dimension); `instruction` is prepended once, if not empty."""
        ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), dimension)."""
        ...
