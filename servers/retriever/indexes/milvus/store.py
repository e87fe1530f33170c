"""A Milvus collection as a document store: ids, vectors, texts and JSON metadata.

One `MilvusStore` per collection, over pymilvus's `MilvusClient`. The same code serves Milvus
Lite (`uri` a local path ending in `.db`, embedded, one process per database folder) and a Milvus
server (`uri` = `http://host:port`, standalone or a cluster). Tested with pymilvus 3.0.2 against
milvus-lite 3.2.2 and against the Milvus 2.3.5 standalone server.

The reads (counts, rows, searches) and their consistency with this store's writes are reads.py's.

Texts and ids longer than `text_max_length` / `id_max_length` (UTF-8 bytes, Milvus's VARCHAR
limit) are refused before anything is written, with an error that names the id: truncating a
passage silently would change what the retriever returns.

Lite and the 2.3.5 server differ in ways this module hides: `delete` returns a list of ids on
Lite and a `delete_count` on the server (we count the matching rows first, so both report rows
that existed); where the collection's `info` is kept differs too (info.py). A server
older than 2.3 lacks upsert and count(*): it is refused at connect with a message that says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
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
from .info import check_rows
from .reads import MAX_TOP_K as MAX_TOP_K  # re-exported (index.py, seen.py)
from .reads import STRONG, Reads, _chunks
from .sparse import FIELD as SPARSE_FIELD
from .sparse import RECORD
from .sparse import add_to as add_sparse

if TYPE_CHECKING:
    from .fulltext import FullText

CONSISTENCY_LEVELS = ("Strong", "Bounded", "Session", "Eventually")


class MilvusStore(Reads):
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

    # -- helpers -----------------------------------------------------------------------------

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
