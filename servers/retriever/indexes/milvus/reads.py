"""What MilvusStore (store.py) reads of its collection's rows: counts, rows by id or expression,
dense and full-text searches; and how a read is made.

Reads see this store's own writes: the first read (search, query, count, get) after an upsert,
delete or create asks for Strong consistency (a Milvus server defaults to Bounded, which can miss
a write made a moment before); later reads use `read_consistency`, Bounded by default, because a
Strong read waits for the server's next time tick (about 400 ms a query on the 2.3.5 server
against 4 ms Bounded, bench/RESULTS.md). Bounded still lags writes made by *other* clients by up
to the server's graceful time (seconds): pass read_consistency="Strong" where another process
writes the same collection. Scores are what Milvus returns for the
metric: IP and COSINE are similarities, L2 a distance; results are best first either way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidInputError
from .client import is_lite
from .info import CollectionInfo

if TYPE_CHECKING:
    from .fulltext import FullText

log = logging.getLogger(__name__)

MAX_TOP_K = 16384  # Milvus's limit on `limit` for a search
STRONG = "Strong"

Found = tuple[str, float, str, dict[str, Any]]  # id, score, text, metadata


def _chunks(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


class Reads(CollectionInfo):
    """MilvusStore's reads of rows; the store gives the attributes, its writes count in `_writes`."""

    full_text: FullText | None
    chunk: int
    read_consistency: str
    _writes: int
    _seen: int

    def count(self, expr: str | None = None) -> int:
        rows = self._read("count", self._client.query, self.collection, filter=expr or "",
                          output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    def get(self, ids: Sequence[str], expr: str | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
        """The rows of `ids` that exist (and match `expr`): text and metadata by id."""
        f = self.fields
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        ids = list(ids)
        for part in _chunks(len(ids), self.chunk):
            # pymilvus takes ids or a filter, not both: the ids as an expression beside `expr`
            by = {"ids": list(ids[part])} if not expr else {"filter": f"({self._ids_expr(ids[part])}) and ({expr})"}
            rows = self._read("query", self._client.query, self.collection, **by,
                              output_fields=[f.id, f.text, f.metadata])
            for row in rows:
                out[row[f.id]] = (row[f.text], row[f.metadata] or {})
        return out

    def matching(self, expr: str) -> dict[str, dict[str, Any]]:
        """Every row matching `expr`: its metadata by id (read whole, as a delete by expression reads its terms)."""
        f = self.fields
        rows = self._read("query", self._client.query, self.collection, filter=expr, output_fields=[f.id, f.metadata])
        return {row[f.id]: row[f.metadata] or {} for row in rows}

    def search(self, vectors: np.ndarray, k: int, expr: str | None = None,
               ann: dict[str, int] | None = None) -> list[list[Found]]:
        """Top `k` per query vector, best first: (id, score, text, metadata). `ann`: nprobe
        (IVF_* indexes) or efSearch (HNSW) for this search, over the configured search_params."""
        if not 1 <= k <= MAX_TOP_K:
            raise InvalidInputError(f"top_k must be between 1 and {MAX_TOP_K} for Milvus, got {k}")
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise InvalidInputError(f"search needs a 2-D array of query vectors, got shape {vectors.shape}")
        if len(vectors) == 0:
            return []
        f = self.fields
        results = self._read(
            "search", self._client.search, self.collection, data=list(vectors), limit=k, filter=expr or "",
            output_fields=[f.text, f.metadata], search_params=self._search_params(ann), anns_field=f.vector,
        )
        return self._hits(results)

    def text_search(self, queries: Sequence[str], k: int, expr: str | None = None) -> list[list[Found]]:
        """BM25 top `k` per query text, best first, scored by Milvus (a full_text collection only;
        the query's terms are ours, or Milvus analyses it: full_text_analyzer). Scores are BM25 scores
        (Lite's negated distance turned back)."""
        if self.full_text is None:
            raise InvalidInputError(f"Milvus collection {self.collection!r} is searched without full_text; "
                                    "set index_backend_configs.milvus.full_text: true")
        if not 1 <= k <= MAX_TOP_K:
            raise InvalidInputError(f"top_k must be between 1 and {MAX_TOP_K} for Milvus, got {k}")
        if not queries:
            return []
        f, analysed = self.fields, self.full_text.analysed(list(queries))
        asked = [i for i, q in enumerate(analysed) if q.strip()]  # a query of stop words only finds nothing
        out: list[list[Found]] = [[] for _ in analysed]
        if not asked:
            return out
        results = self._read(
            "search", self._client.search, self.collection, data=[analysed[i] for i in asked], limit=k,
            filter=expr or "", output_fields=[f.text, f.metadata], search_params=self.full_text.search_params(),
            anns_field=self.full_text.sparse_field,
        )
        for i, hits in zip(asked, self._hits(results), strict=True):
            out[i] = [(d, abs(s), t, m) for d, s, t, m in hits]
        return out

    def _hits(self, results: Any) -> list[list[Found]]:
        """(id, score, text, metadata) per hit. Lite keys a hit's id by the primary field's name;
        the 2.3.5 server's reply names no primary field, so pymilvus keys it "id"."""
        f = self.fields
        return [
            [(hit[f.id] if f.id in hit else hit["id"], float(hit["distance"]), hit["entity"][f.text],
              hit["entity"][f.metadata] or {}) for hit in hits]
            for hits in results
        ]

    # -- how a read is made -------------------------------------------------------------------

    def _ids_expr(self, ids: Sequence[str]) -> str:
        return f"{self.fields.id} in {json.dumps(list(ids), ensure_ascii=False)}"

    def _ensure_loaded(self) -> None:
        """Load the collection before this process's first read: a collection another process made
        is released when that process ends on Milvus Lite (and after a release or restart on a
        server), and a search or query of a released collection fails."""
        if self._loaded:
            return
        state = self._call("get_load_state", self._client.get_load_state, self.collection)["state"]
        if state.name == "NotExist":  # the read itself says the collection is missing
            return
        if state.name != "Loaded":
            log.info("loading Milvus collection %r (state %s)", self.collection, state.name)
            self._call("load_collection", self._client.load_collection, self.collection)
        self._loaded = True

    def _read(self, op: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A read: Strong while a write of this store may be unseen, else read_consistency; the
        collection is loaded first if it is not."""
        self._ensure_loaded()
        writes = self._writes
        if self._seen >= writes:
            return self._call(op, fn, *args, consistency_level=self.read_consistency, **kwargs)
        if is_lite(self.uri):
            self._lite_flush()
        out = self._call(op, fn, *args, consistency_level=STRONG, **kwargs)
        self._seen = max(self._seen, writes)
        return out

    def _lite_flush(self) -> None:
        """Milvus Lite 3.x searches rows still in its write buffer by brute force in Python (115 ms
        a query at 5k rows, 4 ms once flushed; bench/RESULTS.md): flush before the first read after
        writes, and at the first read of a process (rows recovered from the log sit in the buffer).
        One flush after a bulk upsert; a few ms when there is nothing to flush."""
        try:
            self._client.flush(self.collection)
        except Exception as e:  # only a speed-up: the read itself reports a missing collection
            log.debug("Milvus Lite flush of %r skipped: %s", self.collection, e)
