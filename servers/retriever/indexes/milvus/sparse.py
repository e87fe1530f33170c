"""Learned-sparse vectors (SPLADE and its kin: search/learned_sparse.py) in a Milvus collection
that holds the documents (is_demo or full_text), strictly opt-in: only where parameter.yaml names
a sparse model (`sparse.model_name_or_path`). Such a collection has one more field, a
SPARSE_FLOAT_VECTOR (`learned_sparse`) with a SPARSE_INVERTED_INDEX over the inner product, filled
on every write with the documents' vectors from the encoder the engine passes down (indexes sit
below search: indexes.base.SparseEncoding); its info records the model (a changed model is refused
at search and at write). A `sparse` search sends the query's vector and gets the documents ranked
by their dot product with it, filtered by Milvus as dense and BM25 hits are.

Milvus refuses a sparse vector without a nonzero weight: a document whose vector is empty is
written with one weight at the index just past the vocabulary, which no query vector has, so its
scores are unchanged (0 for every query, and Milvus returns no hit scored 0).

A Milvus without sparse vectors (the 2.3 server) is found by a capability check (`probe`: a scratch
collection with such a field, made and dropped), not a version guess, and refused with what to
change. Without a sparse model none of this runs: the schema, writes and searches are as before.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import IndexMismatchError, NotYetSupportedError
from .client import MilvusVersionError, display, load_pymilvus

if TYPE_CHECKING:
    from ...config import Config
    from ..base import SparseEncoding

log = logging.getLogger(__name__)
FIELD = "learned_sparse"  # the collection's field of learned-sparse vectors
RECORD = "learned_sparse"  # the key of the collection's info that records the model
UPGRADE = ("a learned-sparse model (sparse.model_name_or_path) in a collection Milvus holds needs sparse vectors "
           "(Milvus 2.4 or newer, or Milvus Lite 3.x): upgrade the Milvus server, or remove sparse.model_name_or_path "
           "from parameter.yaml (or keep a corpus here, is_demo: false and full_text: false, where the sparse index "
           "is a local one)")


def wanted(cfg: Config) -> bool:
    """Whether this session's config asks for learned-sparse vectors (a sparse model, text documents)."""
    return bool(cfg.sparse.model_name_or_path) and not cfg.is_multimodal


def add_to(schema: Any, index: Any) -> None:
    """The learned-sparse field and its index (inner product)."""
    pymilvus = load_pymilvus()
    schema.add_field(FIELD, pymilvus.DataType.SPARSE_FLOAT_VECTOR)
    index.add_index(field_name=FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="IP",
                    params={"inverted_index_algo": "TAAT_NAIVE"})


def rows_of(matrix: Any) -> list[dict[int, float]]:
    """A scipy CSR matrix's rows as Milvus sparse vectors ({dimension: weight}); an empty row gets
    one weight past the vocabulary (see the module's docstring)."""
    csr = matrix.tocsr()
    out = []
    for i in range(csr.shape[0]):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        row = {int(c): float(v) for c, v in zip(csr.indices[lo:hi], csr.data[lo:hi]) if v != 0}
        out.append(row or {int(csr.shape[1]): 1.0})
    return out


def encoded(encoder: SparseEncoding, texts: Sequence[str]) -> list[dict[int, float]]:
    """The documents' vectors as Milvus takes them."""
    return rows_of(encoder.documents(list(texts)))


def check(info: dict[str, Any], encoder: SparseEncoding | None, collection: str) -> None:
    """The collection was made with this session's sparse model (refused otherwise, with the fix)."""
    saved = info.get(RECORD)
    if encoder is None:
        if saved is not None:
            raise NotYetSupportedError(
                f"Milvus collection {collection!r} holds learned-sparse vectors of {saved.get('model')!r}: set "
                "sparse.model_name_or_path to that model to write to it, or rebuild it without one "
                "(retriever_index(overwrite=true))")
        return
    if saved is None:
        raise IndexMismatchError(f"Milvus collection {collection!r} was made without a sparse model, so it has no "
                                 "learned-sparse vectors; call retriever_index(overwrite=true) to rebuild it with "
                                 "sparse.model_name_or_path, or pick another collection_name")
    now = encoder.record
    wrong = [f"{k}: saved {saved.get(k)!r}, now {v!r}" for k, v in now.items() if saved.get(k) != v]
    if wrong:
        raise IndexMismatchError(f"Milvus collection {collection!r} holds another sparse model's vectors "
                                 f"({'; '.join(wrong)}); call retriever_index(overwrite=true) to rebuild it")


def search(store: Any, queries: Any, k: int, expr: str | None) -> list[list[tuple[str, float, str, dict[str, Any]]]]:
    """Per query vector (a CSR row), the top `k` documents by dot product, best first, as
    (id, score, text, metadata) from `store` (a milvus.MilvusStore); a query
    with an empty vector finds nothing (`k` checked by the caller: milvus_index.MilvusIndex.sparse_hits)."""
    csr = queries.tocsr()
    asked = [i for i in range(csr.shape[0]) if csr.indptr[i + 1] > csr.indptr[i]]
    out: list[list[tuple[str, float, str, dict[str, Any]]]] = [[] for _ in range(csr.shape[0])]
    if not asked:
        return out
    vectors = rows_of(csr[asked])
    f = store.fields
    results = store._read("search", store._client.search, store.collection, data=vectors, limit=k,
                          filter=expr or "", output_fields=[f.text, f.metadata],
                          search_params={"metric_type": "IP", "params": {}}, anns_field=FIELD)
    for i, hits in zip(asked, store._hits(results), strict=True):
        out[i] = hits
    return out


def probe(store: Any) -> None:
    """Capability check, not a version guess: create a scratch collection with a sparse vector
    field and its index, drop it. A Milvus without sparse vectors refuses one or the other (2.3.5
    takes the field and refuses its index)."""
    pymilvus = load_pymilvus()
    client, name, fields = store._client, f"mcp_retriever_probe_{uuid.uuid4().hex[:12]}", store.fields
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field(fields.id, pymilvus.DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field(fields.vector, pymilvus.DataType.FLOAT_VECTOR, dim=2)
    index = client.prepare_index_params()
    index.add_index(field_name=fields.vector, index_type="FLAT", metric_type="IP")
    where = display(store.uri)
    try:
        add_to(schema, index)
        client.create_collection(name, schema=schema, index_params=index)
    except Exception as e:
        try:
            version = str(client.get_server_version())
        except Exception:
            version = "version unknown"
        raise MilvusVersionError(f"the Milvus at {where} ({version}) cannot keep sparse vectors: {e}. {UPGRADE}") from e
    finally:  # a 2.3 server makes the collection and then refuses the index: drop it either way
        _drop(client, name)


def _drop(client: Any, name: str) -> None:
    """Drop the probe's own scratch collection where it exists; nothing else is touched."""
    try:
        if client.has_collection(name):
            client.drop_collection(name)
    except Exception as e:
        log.warning("could not drop the scratch collection %s of the sparse probe: %s", name, e)
