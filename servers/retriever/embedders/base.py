"""The contract every embedding backend meets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


def with_instruction(texts: Sequence[str], instruction: str) -> list[str]:
    """`instruction` prepended to each text once: a text that already starts with it is left alone."""
    if not instruction:
        return list(texts)
    return [t if t.startswith(instruction) else instruction + t for t in texts]


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
