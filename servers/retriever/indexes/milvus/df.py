"""Document frequencies of a full_text collection's terms, kept in Milvus beside it
(`full_text_analyzer: bm25s`), for adaptive fusion's BM25 bound.

Adaptive fusion divides a query's BM25 scores by the highest score its terms allow: (k1 + 1)
times the sum of their idf, idf = log(1 + (N - df + 0.5) / (df + 0.5)) as Milvus computes it
(bm25s's lucene without the (k1 + 1), the local bound). Milvus does not expose a term's document
frequency, so the writer keeps them: collection `<name>__df` holds one row per term (the term,
its df, and a 2-dimensional vector Milvus asks of every collection), changed with every write
through MilvusStore (an insert adds one to each term of the new text, a replaced or deleted
document takes its stored terms away). N is the collection's count at search time.

A read-modify-write per batch: two processes writing the same collection at once can lose
counts; `retriever_index(overwrite=true)` counts them again. A query reads the df of its terms in
one Milvus query per call (per 1,000 distinct terms).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

SUFFIX = "__df"
TERM_BYTES = 512  # longer terms are not counted (their idf is left out of the bound)
CHUNK = 1000


def doc_terms(terms: str) -> set[str]:
    """A document's distinct terms (a df counts documents, not occurrences)."""
    return {t for t in terms.split() if len(t.encode()) <= TERM_BYTES}


class TermStats:
    """The df collection of one full_text collection: `client` a MilvusClient, `call(op, fn, ...)`
    runs a Milvus call with MilvusStore's error messages (milvus.py)."""

    def __init__(self, client: Any, call: Callable[..., Any], collection: str) -> None:
        self._client, self._call = client, call
        self.name = f"{collection}{SUFFIX}"[:255]
        self._loaded = False

    def create(self) -> None:
        from .client import load_pymilvus

        pymilvus, client = load_pymilvus(), self._client
        if self._call("has_collection", client.has_collection, self.name):
            self._call("drop_collection", client.drop_collection, self.name)
        schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("term", pymilvus.DataType.VARCHAR, is_primary=True, max_length=TERM_BYTES)
        schema.add_field("df", pymilvus.DataType.INT64)
        schema.add_field("v", pymilvus.DataType.FLOAT_VECTOR, dim=2)
        index = client.prepare_index_params()
        index.add_index(field_name="v", index_type="FLAT", metric_type="L2")
        self._call("create_collection", client.create_collection, self.name, schema=schema,
                         consistency_level="Strong")
        self._call("create_index", client.create_index, self.name, index, sync=False)
        self._call("load_collection", client.load_collection, self.name)
        self._loaded = True

    def drop(self) -> None:
        client = self._client
        if self._call("has_collection", client.has_collection, self.name):
            self._call("drop_collection", client.drop_collection, self.name)
        self._loaded = False

    def _query(self, terms: Sequence[str]) -> dict[str, int]:
        client = self._client
        if not self._loaded:
            if not self._call("has_collection", client.has_collection, self.name):
                return {}
            self._call("load_collection", client.load_collection, self.name)
            self._loaded = True
        out: dict[str, int] = {}
        for start in range(0, len(terms), CHUNK):
            part = list(terms[start:start + CHUNK])
            expr = f"term in {json.dumps(part, ensure_ascii=False)}"  # Milvus reads no \\u escapes
            rows = self._call("query", client.query, self.name, filter=expr, output_fields=["term", "df"],
                                    consistency_level="Strong")
            out.update({r["term"]: int(r["df"]) for r in rows})
        return out

    def change(self, delta: Counter[str]) -> None:
        """Add `delta` (term -> documents gained, negative for lost) to the stored counts."""
        delta = Counter({t: d for t, d in delta.items() if d})
        if not delta:
            return
        client, terms = self._client, sorted(delta)
        current = self._query(terms)
        rows, gone = [], []
        for t in terms:
            df = current.get(t, 0) + delta[t]
            if df > 0:
                rows.append({"term": t, "df": df, "v": [0.0, 0.0]})
            elif t in current:
                gone.append(t)
        for start in range(0, len(rows), CHUNK):
            self._call("upsert", client.upsert, self.name, rows[start:start + CHUNK])
        for start in range(0, len(gone), CHUNK):
            self._call("delete", client.delete, self.name, ids=gone[start:start + CHUNK])

    def bounds(self, queries: Sequence[str], n: int, k1: float) -> list[float]:
        """Per analysed query (its terms joined by spaces), the highest BM25 score Milvus can give it."""
        split = [q.split() for q in queries]
        dfs = self._query(sorted({t for terms in split for t in terms}))
        return [bound([dfs.get(t, 0) for t in terms], n, k1) for terms in split]


def bound(dfs: Sequence[int], n: int, k1: float) -> float:
    """The highest BM25 score Milvus can give a query whose terms (in order) have document frequencies
    `dfs` among `n` documents: (k1 + 1) times the sum of their idf (a term no document holds adds nothing)."""
    return (k1 + 1) * math.fsum(_idf(df, n) for df in dfs if df > 0)


def _idf(df: int, n: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def counted(terms: Iterable[str], sign: int = 1) -> Counter[str]:
    """+1 (or -1) for each distinct term of each document's terms."""
    out: Counter[str] = Counter()
    for t in terms:
        for term in doc_terms(t):
            out[term] += sign
    return out
