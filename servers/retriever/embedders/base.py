"""The contract every embedding backend meets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ..config import MINILM_ALIASES

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


def model_id_for(name: str) -> str:
    """The name recorded in manifests: MiniLM aliases (and empty) map to one id, so an index
    built by one backend or runtime loads under another serving the same model."""
    return MINILM_ID if name.strip().lower() in MINILM_ALIASES else name.strip()


def with_instruction(texts: Sequence[str], instruction: str) -> list[str]:
    """`instruction` prepended to each text once: a text that already starts with it is left alone."""
    if not instruction:
        return list(texts)
    return [t if t.startswith(instruction) else instruction + t for t in texts]


class Embedder(Protocol):
    model_id: str
    """A stable name of the model, recorded in manifests (not a machine-specific path)."""
    dimension: int
    runtime: str
    """How vectors are computed ("openvino bf16", "openai server"): recorded in manifests."""
    runtime_reason: str
    warnings: list[str]
    """Fallbacks taken so far (a missing prompt name, no GPU); shown in tool results."""

    def encode_queries(self, texts: Sequence[str], instruction: str) -> np.ndarray:
        """float32 (len(texts), dimension); `instruction` is prepended once, if not empty."""
        ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), dimension)."""
        ...
