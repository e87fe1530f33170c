"""The index contracts: a VectorIndex (rows in, rows and scores out, changes applied), the
VectorBackend that loads and builds it, and the HeldDocuments of a backend that holds the documents
too (Milvus); tests/index_contract.py is the battery every backend passes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..filters import Filter
from ..types import Document, Hit

if TYPE_CHECKING:
    from ..config import Config
    from ..embedders import Embedder
    from ..security.visibility import Rule
    from ..store.collection import Collection


# The ANN search settings: FAISS's name -> the name in parameter.yaml and in a search call.
ANN_PARAMETERS = {"nprobe": "nprobe", "efSearch": "ef_search"}


def ann_settings(source: Any) -> dict[str, int]:
    """The ANN settings `source` sets (the YAML's faiss section, a search request), by FAISS's names."""
    return {name: value for name, ours in ANN_PARAMETERS.items() if (value := getattr(source, ours)) is not None}


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
               f: Filter | None = None, ann: dict[str, int] | None = None) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray]]:
        """Per query, rows (int64) and scores best first, at most k. The candidates are limited
        exactly (not post-filtered) by `allowed`, a boolean mask over rows (the filter and the
        live rows), or by the filter `f` where the backend evaluates filters itself. `ann`:
        nprobe / efSearch for this search (InvalidInputError from an index without them)."""
        ...

    def apply(self, change: Change) -> VectorIndex:
        """The index after `change`: a new snapshot; searches holding this one are undisturbed."""
        ...


class SparseEncoding(Protocol):
    """A learned-sparse model (search/learned_sparse.SparseModel), handed down to a backend that
    keeps its vectors itself (Milvus holding the documents: milvus/sparse.py)."""

    @property
    def record(self) -> dict[str, Any]:
        """What a collection records of the model (a different one is refused)."""
        ...

    def documents(self, texts: Sequence[str], progress: bool = False) -> Any:
        """The documents' vectors, a scipy CSR matrix (one row each)."""
        ...

    def queries(self, texts: Sequence[str]) -> Any:
        """The queries' vectors, a scipy CSR matrix (one row each)."""
        ...


@dataclass(frozen=True)
class View:
    """What an index backend sees of a session: its settings, its documents (the corpus and the
    change log, by row) and its model; `sparse`: the learned-sparse model where the engine writes
    to a backend that keeps its vectors (None: none configured, or not needed here)."""

    config: Config
    collection: Collection
    embedder: Embedder
    sparse: SparseEncoding | None = None


Vectors = Iterator[tuple[list[Document], np.ndarray]]  # documents and their vectors, a batch at a time


class VectorBackend(Protocol):
    """Where a collection's vectors live (FAISS files, a Milvus collection): load, build and
    describe. Chosen once from the config (indexes.backend_for)."""

    def load(self, view: View, warnings: list[str]) -> VectorIndex | None:
        """The saved index, checked against the view (a mismatch raises IndexMismatchError) and
        brought up to the change log; None when there is none."""
        ...

    def build(self, view: View, embedding_file: Path | None, index_path: Path, overwrite: bool) -> tuple[VectorIndex, dict[str, Any]]:
        """(Re)build from the embedding file (or, holding the documents, from corpus_path) and
        publish; the index with the change log applied, and the report of the build."""
        ...

    def describe(self, cfg: Config) -> list[dict[str, Any]] | None:
        """Every collection the backend holds; None when the collections are local folders."""
        ...


class HeldDocuments(Protocol):
    """A backend that holds the documents themselves (Milvus with is_demo or full_text): there is
    no corpus or change log here; writes, reads and hits go straight to it. A backend without one
    (FAISS, Milvus holding vectors only) leaves the documents to the local change log."""

    def seen_by(self, rule: Rule | None) -> HeldDocuments:
        """The documents as a caller of `rule` sees them (security/visibility.py; None: all): the
        backend applies it in every search, read, count and delete below."""
        ...

    def hits(self, index: VectorIndex | None, vectors: np.ndarray, k: int, f: Filter | None,
             ann: dict[str, int] | None = None) -> list[list[Hit]]:
        """Dense hits with the text the backend stored."""
        ...

    def text_hits(self, index: VectorIndex | None, queries: Sequence[str], k: int, f: Filter | None) -> list[list[Hit]]:
        """BM25 hits ranked by the backend (NotYetSupportedError where it does not rank text)."""
        ...

    def text_bounds(self, index: VectorIndex | None, queries: Sequence[str]) -> list[float] | None:
        """Per query, the highest BM25 score its terms allow over the documents the caller sees
        (adaptive fusion's scale), or None where the backend does not know it."""
        ...

    def sparse_hits(self, index: VectorIndex | None, encoder: SparseEncoding, queries: Sequence[str], k: int,
                    f: Filter | None) -> list[list[Hit]]:
        """Learned-sparse hits ranked by the backend (NotYetSupportedError / IndexMismatchError where
        it keeps no vectors of `encoder`'s model)."""
        ...

    def text_index(self, index: VectorIndex | None) -> int | None:
        """Documents BM25 ranks (None where the backend does not rank text)."""
        ...

    def get(self, index: VectorIndex | None, ids: Sequence[str]) -> list[Document]:
        """The stored documents of `ids` that exist, in the order given."""
        ...

    def count(self, index: VectorIndex | None) -> int:
        """How many documents there are (that the caller sees)."""
        ...

    def upsert(self, view: View, index: VectorIndex | None, docs: Sequence[Document],
               vectors: np.ndarray) -> tuple[VectorIndex, int]:
        """Write documents (an id that exists is replaced): the index and how many it replaced."""
        ...

    def delete(self, index: VectorIndex | None, ids: Sequence[str], f: Filter | None) -> tuple[int, list[str]]:
        """Delete by id and/or filter: how many, and the ids not found."""
        ...
