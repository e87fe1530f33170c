"""Small frozen values that flow from the engine to the MCP layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked result: the corpus row it came from, its id, text and score. A fused hit also
    says where it came from: per retriever, its rank and score there (None if it was not found)."""

    row: int
    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, tuple[int, float] | None] | None = None  # retriever -> (rank, score)
    collection: str | None = None  # set by a fan-out search: the collection the hit came from

    def rescored(self, score: float) -> Hit:
        """This hit with another score (dataclasses.replace's result, a third of its time: every hit
        of a scaled search goes through it)."""
        return Hit(self.row, self.id, self.text, score, self.metadata, self.sources, self.collection)


Hits = list[list[Hit]]  # per query, its hits best first
Payload = dict[str, Any]  # a tool's reply, as JSON
