"""A Milvus collection as a document store: ids, vectors, texts and JSON metadata.

One `MilvusStore` per collection, over pymilvus's `MilvusClient`. The same code serves Milvus
Lite (`uri` a local path ending in `.db`, embedded, one process per database folder) and a Milvus
server (`uri` = `http://host:port`, standalone or a cluster). Tested with pymilvus 3.0.2 against
milvus-lite 3.2.2 and against the Milvus 2.3.5 standalone server.

Reads see this store's own writes: the first read (search, query, count, get) after an upsert,
delete or create asks for Strong consistency (a Milvus server defaults to Bounded, which can miss
a write made a moment before); later reads use `read_consistency`, Bounded by default, because a
Strong read waits for the server's next time tick (about 400 ms a query on the 2.3.5 server
against 4 ms Bounded, bench/RESULTS.md). Bounded still lags writes made by *other* clients by up
to the server's graceful time (seconds): pass read_consistency="Strong" where another process
writes the same collection. Scores are what Milvus returns for the
metric: IP and COSINE are similarities, L2 a distance; results are best first either way.

Texts and ids longer than `text_max_length` / `id_max_length` (UTF-8 bytes, Milvus's VARCHAR
limit) are refused before anything is written, with an error that names the id: truncating a
passage silently would change what the retriever returns.

Lite and the 2.3.5 server differ in ways this module hides: `delete` returns a list of ids on
Lite and a `delete_count` on the server (we count the matching rows first, so both report rows
that existed); where the collection's `info` is kept differs too (info.py). A server
older than 2.3 lacks upsert and count(*): it is refused at connect with a message that says so.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from ...config.milvus import NAME_PATTERN, MilvusFields  # noqa: F401  (re-exported)
from ...errors import IndexMismatchError, InvalidInputError, RetrieverError
from .client import (  # noqa: F401  (re-exported: the Milvus layer's public names)
    MilvusError,
    MilvusLiteLockedError,
    MilvusVersionError,
    connect,
    display,
    is_lite,
    list_collections,
    load_pymilvus,
    validate_collection_name,
)
from .df import TermStats, counted
from .info import CollectionInfo, check_rows
from .sparse import FIELD as SPARSE_FIELD
from .sparse import RECORD
from .sparse import add_to as add_sparse

if TYPE_CHECKING:
    from .fulltext import FullText

log = logging.getLogger(__name__)

MAX_TOP_K = 16384  # Milvus's limit on `limit` for a search
STRONG = "Strong"
CONSISTENCY_LEVELS = ("Strong", "Bounded", "Session", "Eventually")

Found = tuple[str, float, str, dict[str, Any]]  # id, score, text, metadata


def _chunks(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


class MilvusStore(CollectionInfo):
    """One Milvus collection: create, upsert, delete, search, count, get, info, drop."""

    def __init__(
        self,
        uri: str,
        token: str | None,
        collection: str,
        fields: MilvusFields = MilvusFields(),  # noqa: B008 - a frozen value, never mutated
        metric_type: str = "IP",
        index_params: dict[str, Any] | None = None,
        search_params: dict[str, Any] | None = None,
        chunk: int = 1000,
        read_consistency: str = "Bounded",
        full_text: FullText | None = None,
    ) -> None:
        self.collection = validate_collection_name(collection)
        self.full_text = full_text  # BM25 by Milvus over the text field (fulltext.py); None: dense only
        if read_consistency not in CONSISTENCY_LEVELS:
            raise InvalidInputError(f"read_consistency must be one of {CONSISTENCY_LEVELS}, got {read_consistency!r}")
        self.read_consistency = read_consistency
        # writes made / writes a finished Strong read has seen: reads are Strong until they match
        self._writes, self._seen = 1, 0
        self._loaded = False  # known to be loaded into memory (a search needs it); checked at the first read
        self._term_stats: TermStats | None = None
        self._pending: Counter[str] = Counter()  # df counted by a build, written at its end
        if chunk < 1:
            raise InvalidInputError(f"index_chunk_size must be >= 1, got {chunk}")
        self.uri = uri
        self.fields = fields
        self.metric_type = metric_type
        self.index_params = dict(index_params or {"index_type": "FLAT", "params": {}})
        self.index_params.setdefault("metric_type", metric_type)
        self.search_params = dict(search_params or {})
        self.search_params.setdefault("metric_type", self.index_params["metric_type"])
        self.chunk = chunk
        self._client = connect(uri, token)

    @property
    def _stats(self) -> TermStats | None:
        """Our terms' document frequencies (full_text_analyzer bm25s), beside the collection."""
        ft = self.full_text
        if ft is None or not ft.terms_field:
            return None
        if self._term_stats is None:
            self._term_stats = TermStats(self._client, self._call, self.collection)
        return self._term_stats

    def bm25_bounds(self, queries: Sequence[str]) -> list[float] | None:
        """Per query, the highest BM25 score its terms allow here ((k1 + 1) times the sum of their
        idf), or None where this collection keeps no document frequencies (df.py)."""
        ft, stats = self.full_text, self._stats
        if ft is None or stats is None:
            return None
        return stats.bounds(ft.analysed(list(queries)), self.count(), ft.k1)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def exists(self) -> bool:
        return bool(self._call("has_collection", self._client.has_collection, self.collection))

    def create(self, dimension: int, info: dict[str, Any]) -> None:
        """Create the collection if missing (schema, index, load) and store `info` with it.

        An existing collection of another dimension is refused.
        """
        if dimension < 1:
            raise InvalidInputError(f"dimension must be >= 1, got {dimension}")
        if self.exists():
            found = self.dimension()
            if found != dimension:
                raise IndexMismatchError(
                    f"Milvus collection {self.collection!r} holds {found}-dimensional vectors, not {dimension}; "
                    "use another collection name or drop this one"
                )
            if self.info() is None:
                self._set_info(dimension, info)
            return
        pymilvus = load_pymilvus()
        f = self.fields
        schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(f.id, pymilvus.DataType.VARCHAR, is_primary=True, max_length=f.id_max_length)
        schema.add_field(f.vector, pymilvus.DataType.FLOAT_VECTOR, dim=dimension)
        ft = self.full_text
        schema.add_field(f.text, pymilvus.DataType.VARCHAR, max_length=f.text_max_length,
                         **(ft.text_params() if ft else {}))
        schema.add_field(f.metadata, pymilvus.DataType.JSON)
        index = self._client.prepare_index_params()
        params = dict(self.index_params)
        index.add_index(field_name=f.vector, **params)
        if ft is not None:
            ft.add_to(schema, index, f.text, f.text_max_length)
        if info.get(RECORD) is not None:  # a sparse model's vectors (sparse.py: opt-in)
            add_sparse(schema, index)
        self._call("create_collection", self._client.create_collection, self.collection, schema=schema,
                   consistency_level=STRONG)
        self._writes += 1
        # sync=False: waiting for the index asks for AllocTimestamp, which Milvus Lite does not
        # implement (it logs an error); the collection is empty, and load waits for the index anyway
        self._call("create_index", self._client.create_index, self.collection, index, sync=False)
        self._call("load_collection", self._client.load_collection, self.collection)
        self._loaded = True
        if self._stats is not None:  # the df of our terms (df.py), counted as documents come
            self._stats.create()
        self._set_info(dimension, info)

    def drop(self) -> None:
        self._call("drop_collection", self._client.drop_collection, self.collection)
        self._loaded = False
        if self._stats is not None:
            self._stats.drop()
        if is_lite(self.uri):
            self._lite_infos({self.collection: None})

    # -- writes ------------------------------------------------------------------------------

    def upsert(
        self, ids: Sequence[str], vectors: np.ndarray, texts: Sequence[str], metadatas: Sequence[dict[str, Any]],
        new: bool = False, sparse: Sequence[dict[int, float]] | None = None,
    ) -> int:
        """Insert or replace rows by id, `chunk` rows per call. Returns the number of rows written.
        `new`: the ids are not in the collection (a build): nothing is read back, and the document
        frequencies of our terms wait for `count_terms()`. `sparse`: the rows' learned-sparse vectors
        (a collection made with a sparse model: sparse.py)."""
        ids, texts, metadatas = list(ids), list(texts), list(metadatas)
        check_rows(self.fields, ids, vectors, texts, metadatas)
        f, ft = self.fields, self.full_text
        vectors = np.asarray(vectors, dtype=np.float32)
        for part in _chunks(len(ids), self.chunk):
            rows = [
                {f.id: i, f.vector: v, f.text: t, f.metadata: m}
                for i, v, t, m in zip(ids[part], vectors[part], texts[part], metadatas[part], strict=True)
            ]
            for row, vector in zip(rows, sparse[part] if sparse is not None else (), strict=False):
                row[SPARSE_FIELD] = vector
            delta = None
            if ft is not None and ft.terms_field:  # our bm25s terms, read by Milvus's BM25 function
                for row, terms in zip(rows, ft.analysed(texts[part]), strict=True):
                    if len(terms.encode()) > f.text_max_length:
                        raise InvalidInputError(f"document {row[f.id]!r}: its BM25 terms exceed text_max_length="
                                                f"{f.text_max_length} bytes; split the document")
                    row[ft.terms_field] = terms
                delta = counted([r[ft.terms_field] for r in rows])
                if new:
                    self._pending.update(delta)
                    delta = None
                else:
                    delta.update(self._stored_terms(ids=ids[part]))  # update, not +: it keeps what falls below 0
            self._call("upsert", self._client.upsert, self.collection, rows)
            self._writes += 1
            if delta is not None and self._stats is not None:
                self._stats.change(delta)
        return len(ids)

    def count_terms(self) -> None:
        """Write the document frequencies a build's `upsert(new=True)` calls counted."""
        if self._stats is not None and self._pending:
            self._stats.change(self._pending)
        self._pending = Counter()

    def _stored_terms(self, ids: Sequence[str] | None = None, expr: str | None = None) -> Counter[str]:
        """-1 for each distinct term of the stored documents (by id, or matching `expr`) that a write
        replaces or deletes; empty where the collection keeps no terms of ours."""
        ft = self.full_text
        if ft is None or not ft.terms_field or self._stats is None:
            return Counter()
        rows = self._read("query", self._client.query, self.collection, ids=list(ids) if ids is not None else None,
                          filter=expr or "", output_fields=[ft.terms_field])
        return counted([r[ft.terms_field] for r in rows], -1)

    def delete(self, ids: Sequence[str] | None = None, expr: str | None = None) -> int:
        """Delete rows by id or by a Milvus boolean expression; returns how many existed."""
        if (ids is None) == (expr is None):
            raise InvalidInputError("delete needs exactly one of ids or expr")
        if ids is not None:
            ids = list(ids)
            found = sum(self.count(self._ids_expr(ids[part])) for part in _chunks(len(ids), self.chunk))
            for part in _chunks(len(ids), self.chunk) if found else ():
                delta = self._stored_terms(ids=ids[part])
                self._call("delete", self._client.delete, self.collection, ids=ids[part])
                self._writes += 1
                if delta and self._stats is not None:
                    self._stats.change(delta)
            return found
        if not expr or not expr.strip():
            raise InvalidInputError("delete with an empty expression would delete everything; use drop()")
        found = self.count(expr)
        if found:
            delta = self._stored_terms(expr=expr)
            self._call("delete", self._client.delete, self.collection, filter=expr)
            self._writes += 1
            if delta and self._stats is not None:
                self._stats.change(delta)
        return found

    # -- reads -------------------------------------------------------------------------------

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

    # -- helpers -----------------------------------------------------------------------------

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

    def _call(self, op: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RetrieverError:
            raise
        except Exception as e:
            # Milvus echoes an expression it cannot parse: a caller's filter values, not for the reply
            message = str(e).replace(str(kwargs["filter"]), "<the filter expression>") if kwargs.get("filter") else str(e)
            raise MilvusError(
                f"Milvus {op} on collection {self.collection!r} at {display(self.uri)} failed: {message}"
            ) from e
