"""The retriever kinds, one record each: its ranker over local rows (rankers.py), whether it needs
the embedding model, how a backend that holds the documents answers it (stored.py), and the
options a call may give it. Every list of kinds derives from KINDS: the modes a call may name,
the request of each kind (api/models.py SEARCH_REQUESTS), the CLI's --mode choices. Adding a kind
is its ranker and its record here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import HybridConfig
from ..errors import InvalidInputError, NotYetSupportedError
from ..indexes import HeldDocuments
from ..security import visibility
from ..session import Session
from ..types import Hits
from . import learned_sparse, stored
from .rankers import BM25, Dense, Hybrid, Ranker
from .spec import Spec

# the options a call may give a kind besides its queries, filters and scores
INSTRUCTION, ANN, FUSION = "query_instruction", "ann", "fusion"
# (the ranker is the kind's own: Dense, Hybrid ...)
HeldSearch = Callable[[Session, HeldDocuments, Spec], Hits]


@dataclass(frozen=True)
class Kind:
    name: str
    ranker: Callable[[HybridConfig, str | None, dict[str, int] | None], Ranker]  # (hybrid options, instruction, ann)
    embedder: bool  # needs the embedding model
    held: HeldSearch  # where the index backend holds the documents (Milvus is_demo / full_text)
    options: tuple[str, ...] = ()


_KINDS = (  # the first is the default of every search surface (the best we have)
    Kind("hybrid", lambda h, instruction, ann: Hybrid(h, instruction, ann), True, stored.hybrid,
         (INSTRUCTION, ANN, FUSION)),
    Kind("dense", lambda h, instruction, ann: Dense(instruction, ann), True, stored.dense, (INSTRUCTION, ANN)),
    Kind("bm25", lambda h, instruction, ann: BM25(), False, stored.bm25),
    Kind("sparse", lambda h, instruction, ann: learned_sparse.Sparse(), False, stored.sparse),
)
KINDS: dict[str, Kind] = {k.name: k for k in _KINDS}
MODES = tuple(KINDS)
DEFAULT_MODE = MODES[0]


def of(mode: str) -> Kind:
    """The kind `mode` names (an unknown mode names the known ones)."""
    if mode not in KINDS:
        raise InvalidInputError(f"mode must be one of {sorted(KINDS)}, got {mode!r}")
    return KINDS[mode]


def kind(mode: str, h: HybridConfig, query_instruction: str | None = None, ann: dict[str, int] | None = None,
         s: Session | None = None) -> Ranker:
    """The ranker of kind `mode` with its options; with `s`, checked against the session first."""
    k = of(mode)
    if s is not None and k.embedder and s.embedder is None:
        raise NotYetSupportedError(f"mode {mode!r}: backend is 'bm25', which has no embedder; use mode 'bm25'")
    return k.ranker(h, query_instruction, ann)


def held_search(s: Session, store: HeldDocuments, spec: Spec) -> Hits:
    """Per query, the backend's top `spec.k` hits of its ranker's kind, where the backend holds the
    documents; only those the caller sees (security/visibility.py: the backend ANDs the rule into each
    search as an expression, indexes/milvus/filters.py `visible`)."""
    return of(spec.ranker.name).held(s, store.seen_by(visibility.rule(s.config)), spec)
