"""A Milvus collection as the session's dense index (`index_backend: milvus`).

Milvus keeps the documents themselves: corpus ids are the primary keys, the text and the other
fields are stored beside each vector. In normal mode the engine still knows every document
locally (the corpus file and the change log), so search results are mapped from ids to the
collection's rows and flow through the same hit, fusion and BM25 code as FAISS. In `is_demo`
mode there is no local corpus: hits come straight from Milvus (`search_hits`).

Filters are translated to Milvus expressions (filters.to_milvus), not applied as row masks;
deletes are real deletes in Milvus. The collection records, as a property, the model,
dimension and corpus fingerprint it was built with and the change-log generation it has
applied; a collection behind the log (a crash between the two writes) is brought up to date
from the log's vectors at the next start.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...compute import on_compute_thread
from ...config.milvus import MilvusConfig
from ...errors import InvalidInputError
from ...filters import Filter
from ...security.visibility import Rule
from ...types import Document, Hit
from ..base import Change, SparseEncoding
from . import seen
from . import sparse as milvus_sparse
from .filters import where
from .fulltext import FullText
from .store import MAX_TOP_K, MilvusStore

log = logging.getLogger(__name__)
DEFAULT_COLLECTION = "default"


def open_store(mcfg: MilvusConfig, collection: str, full_text: FullText | None = None) -> MilvusStore:
    """The Milvus collection named `collection` ("" = "default"); the token from the YAML or MILVUS_TOKEN."""
    return MilvusStore(mcfg.uri, mcfg.token or os.environ.get("MILVUS_TOKEN"), collection or DEFAULT_COLLECTION,
                       mcfg.fields(), mcfg.metric_type, mcfg.index_params, mcfg.search_params, mcfg.index_chunk_size,
                       mcfg.read_consistency, full_text)


class MilvusIndex:
    kind = "milvus"

    def __init__(self, store: MilvusStore, row_of: Mapping[str, int] | None, manifest: dict[str, Any]) -> None:
        self.store = store
        self._row_of = row_of  # id -> live row of the local collection; None in demo mode
        self.manifest = manifest
        self.dimension = int(manifest["dimension"])
        self.warnings: list[str] = []

    def __len__(self) -> int:
        return self.store.count()

    def with_rows(self, row_of: Mapping[str, int] | None) -> MilvusIndex:
        return MilvusIndex(self.store, row_of, self.manifest)

    # ---- reads ------------------------------------------------------------------------------

    def _where(self, f: Filter | None, rule: Rule | None) -> str | None:
        """The filter and the caller's visibility (security/visibility.py) as one Milvus expression."""
        return where(f, rule, self.store.fields.id, self.store.fields.metadata)

    def _raw(self, queries: np.ndarray, k: int, f: Filter | None, ann: dict[str, int] | None,
             rule: Rule | None = None) -> list[list[tuple[str, float, str, dict]]]:
        expr = self._where(f, rule)
        return on_compute_thread(self.store.search, np.ascontiguousarray(queries, dtype=np.float32), k, expr, ann)

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None,
               f: Filter | None = None, ann: dict[str, int] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Rows and scores best first; `allowed` is not needed (deletes are real, the filter is
        an expression), `f` is applied by Milvus."""
        row_of = self._row_of or {}
        rows_out, scores_out = [], []
        for hits in self._raw(queries, k, f, ann):
            pairs = [(row_of[i], s) for i, s, _, _ in hits if i in row_of]
            rows_out.append(np.asarray([r for r, _ in pairs], dtype=np.int64))
            scores_out.append(np.asarray([s for _, s in pairs], dtype=np.float32))
        return rows_out, scores_out

    def text_hits(self, queries: Sequence[str], k: int, f: Filter | None = None,
                  rule: Rule | None = None) -> list[list[Hit]]:
        """BM25 hits ranked by Milvus (full_text), with the text and metadata Milvus stored; `rule`: only
        the documents a restricted caller sees (security/visibility.py), scored with their statistics
        alone (seen.py), not the collection's."""
        if rule is not None:
            return on_compute_thread(seen.text_hits, self.store, list(queries), k, f, rule)
        return _hits(on_compute_thread(self.store.text_search, list(queries), k, self._where(f, None)), None)

    def bm25_bounds(self, queries: Sequence[str], rule: Rule | None = None) -> list[float] | None:
        """Per query, the highest BM25 score its terms allow in this collection (adaptive fusion's
        BM25 scale), or None where Milvus keeps no document frequencies of ours (df.py); `rule`: over
        the documents it sees (seen.py)."""
        if rule is not None:
            return on_compute_thread(seen.bounds, self.store, list(queries), rule)
        return on_compute_thread(self.store.bm25_bounds, list(queries))

    def health(self, timeout: float) -> str | None:
        """None when Milvus answers and the collection is searchable, else why not (/readyz)."""
        return self.store.health(timeout)

    def search_hits(self, queries: np.ndarray, k: int, f: Filter | None = None,
                    ann: dict[str, int] | None = None, rule: Rule | None = None) -> list[list[Hit]]:
        """Hits with the text and metadata Milvus stored (demo mode: no local corpus)."""
        return _hits(self._raw(queries, k, f, ann, rule), rule)

    def sparse_hits(self, queries: Any, k: int, f: Filter | None = None, rule: Rule | None = None) -> list[list[Hit]]:
        """Learned-sparse hits (query vectors: a CSR matrix) ranked by Milvus (sparse.py)."""
        if not 1 <= k <= MAX_TOP_K:
            raise InvalidInputError(f"top_k must be between 1 and {MAX_TOP_K} for Milvus, got {k}")
        found = on_compute_thread(milvus_sparse.search, self.store, queries, k, self._where(f, rule))
        return _hits(found, rule)

    def get(self, ids: Sequence[str], rule: Rule | None = None) -> list[Document]:
        """The stored documents of `ids` that exist and `rule` sees, in the order given."""
        found = self.store.get(list(ids), self._where(None, rule))
        return [Document(i, found[i][0], found[i][1]) for i in ids if i in found and _sees(rule, found[i][1])]

    def matching(self, f: Filter, rule: Rule) -> list[str]:
        """The ids of the documents that pass `f` and that `rule` sees (a restricted caller's delete)."""
        return [i for i, m in self.store.matching(self._where(f, rule) or "").items() if rule.sees(m)]

    def count(self, rule: Rule | None = None) -> int:
        """The documents `rule` sees (None: every one)."""
        return self.store.count(self._where(None, rule))

    # ---- writes -----------------------------------------------------------------------------

    def write(self, docs: Sequence[Document], vectors: np.ndarray,
              sparse: Sequence[dict[int, float]] | None = None) -> None:
        self.store.upsert([d.id for d in docs], vectors, [d.text for d in docs], [d.metadata for d in docs],
                          sparse=sparse)

    def apply(self, change: Change) -> MilvusIndex:
        """The change log's latest change: upsert the added documents, delete the deleted ids,
        record the generation."""
        if change.added and change.vectors is not None:
            self.write(change.added, change.vectors)
        if change.deleted:
            self.store.delete(ids=list(change.deleted))
        manifest = {**self.manifest, "log_generation": change.generation}
        self.store.update_info(manifest)
        return MilvusIndex(self.store, change.row_of, manifest)


def _sees(rule: Rule | None, metadata: dict[str, Any]) -> bool:
    """Rule.sees again over what the expression let through: where Milvus reads a value otherwise than
    Python (a list holding a non-string: filters.visible), the document stays hidden."""
    return rule is None or rule.sees(metadata)


def _hits(found: list[list[tuple[str, float, str, dict]]], rule: Rule | None) -> list[list[Hit]]:
    return [[Hit(row=-1, id=i, text=t, score=s, metadata=m) for i, s, t, m in hits if _sees(rule, m)]
            for hits in found]


_STORES: dict[tuple[str, str], MilvusStore] = {}


def shared_store(mcfg: MilvusConfig, collection: str, full_text: FullText | None = None) -> MilvusStore:
    """One client per (uri, collection) in this process: Milvus Lite lets one process open a
    database, and a session rebuilt by retriever_init keeps using the same connection. `full_text`:
    what a new store creates and searches BM25 with (a session sets it on the store it uses)."""
    key = (mcfg.uri, collection or DEFAULT_COLLECTION)
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = open_store(mcfg, collection, full_text)
    return store


def build_collection(store: MilvusStore, info: dict[str, Any], batches: Any, overwrite: bool,
                     sparse: SparseEncoding | None = None) -> MilvusIndex:
    """(Re)create the collection and fill it from `batches` of (documents, vectors); with `sparse`
    (info records its model) the documents' learned-sparse vectors too."""
    if store.exists():
        if not overwrite:
            from ...errors import AlreadyExistsError

            raise AlreadyExistsError(f"Milvus collection {store.collection!r} exists; pass overwrite=true to rebuild it")
        store.drop()
    store.create(int(info["dimension"]), info)
    for docs, vectors in batches:
        if docs:
            texts = [d.text for d in docs]
            store.upsert([d.id for d in docs], vectors, texts, [d.metadata for d in docs], new=True,
                         sparse=milvus_sparse.encoded(sparse, texts) if sparse is not None else None)
    store.count_terms()
    return MilvusIndex(store, None, {**info, "dimension": int(info["dimension"])})
