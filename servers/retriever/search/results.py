"""Tool input checks and result assembly shared by every search: pure helpers, no I/O but the
document store's reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from ..errors import InvalidInputError
from ..types import Document, Hit

T = TypeVar("T")


def as_queries(query_list: str | Sequence[str], name: str = "query_list") -> list[str]:
    """A single string or a list of strings -> a non-empty list of strings."""
    if isinstance(query_list, str):
        return [query_list]
    if not isinstance(query_list, Sequence) or not query_list:
        raise InvalidInputError(f"{name} must be a string or a non-empty list of strings")
    bad = [i for i, q in enumerate(query_list) if not isinstance(q, str)]
    if bad:
        raise InvalidInputError(f"{name}[{bad[0]}] is {type(query_list[bad[0]]).__name__}, expected a string")
    return list(query_list)


def check_top_k(top_k: int) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InvalidInputError(f"top_k must be an integer >= 1, got {top_k!r}")
    return top_k


def pick(given: Any, default: Any) -> Any:
    """A tool argument overrides the YAML value for this call only."""
    return default if given is None else given


class Rows(Protocol):
    """What hits are read from: a corpus file's store or a collection (corpus + change log)."""

    def get(self, row: int) -> Document: ...

    def records(self, rows: Sequence[int]) -> list[tuple[str, str, dict[str, Any]]]:
        """Id, text and metadata of each of `rows`."""
        ...


def build_hits(docs: Rows, rows: Sequence[np.ndarray], scores: Sequence[np.ndarray],
               sources: Sequence[list[Any]] | None = None) -> list[list[Hit]]:
    """Per query, the hits of its rows (scaling and thresholds are result stages, search/stages.py);
    a document is read once per call, all of them in one pass."""
    ranked = [r.tolist() for r in rows]
    wanted = list(dict.fromkeys(row for query_rows in ranked for row in query_rows if row >= 0))
    read = dict(zip(wanted, docs.records(wanted)))
    out = []
    for q, (query_rows, query_scores) in enumerate(zip(ranked, scores)):
        came = sources[q] if sources is not None else None
        out.append([Hit(row, (doc := read[row])[0], doc[1], score, doc[2],  # positional: a fifth faster
                        None if came is None else came[i])
                    for i, (row, score) in enumerate(zip(query_rows, query_scores.tolist()))
                    if row >= 0])  # FAISS marks missing results with -1
    return out


def as_groups(batch: Any, name: str = "batch_query_list") -> list[list[str]]:
    """A non-empty list of query lists (each a list of strings, or one string)."""
    if isinstance(batch, str) or not isinstance(batch, Sequence) or not batch:
        raise InvalidInputError(f"{name} must be a non-empty list of query lists")
    return [as_queries(g, f"{name} item") for g in batch]


def regroup(flat: Sequence[T], sizes: Sequence[int]) -> list[list[T]]:
    """Per-query results of the flattened groups split back into groups of `sizes`."""
    out, start = [], 0
    for n in sizes:
        out.append(list(flat[start : start + n]))
        start += n
    return out


def search_groups(search: Callable[[list[str]], list[T]], batch: Any, name: str = "batch_query_list") -> list[list[T]]:
    """One search over every query of every group, its per-query results split back into the groups."""
    groups = as_groups(batch, name)
    return regroup(search([q for g in groups for q in g]), [len(g) for g in groups])
