"""BM25 of a full_text collection scored with the statistics of the documents one caller sees
(security.visibility, issue 47), where Milvus holds the documents.

Milvus scores BM25 with the whole collection's statistics (N, the average length, each term's document
frequency): a restricted caller's expression (filters.visible) chooses which documents are scored, not
what they are scored with, so a hidden document would move the scores of those it sees. For such a
caller the terms of the documents it sees (`full_text_analyzer: bm25s`: the terms field, our bm25s
analysis) are read from Milvus once by its rule's expression and checked with Rule.sees, split as
Milvus's `standard` tokenizer splits that field (`\\w+`, lowercased), and kept as term frequencies and
lengths (bm25_visible.Terms); a query is scored with bm25_visible's formulas (bm25s's `lucene`: Milvus's
idf and length normalisation) times Milvus's (k1 + 1): the scores Milvus gives a collection of only
those documents (tests/test_visibility_held_scores.py). Adaptive fusion's bound is counted over them
too (df.bound).

One copy per (collection, this process's writes to it, rule, BM25 settings), the `CACHED` most recently
used, at most `CACHED_TOKENS` tokens together (the newest is kept whatever its size); a write through
this process makes the next search read the documents again. The hits' text and metadata are read by
id at each search and checked with Rule.sees, so a document another process has since hidden or
deleted is never shown (its statistics stay in until this process writes or restarts).

The documents are read a page at a time (`paged`), so a collection holding more than one query's reply
(a server's maxOutputSize) is read whole.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidInputError, NotYetSupportedError
from ...security.visibility import Rule
from ...types import Hit
from .. import bm25_visible
from .df import bound
from .filters import visible, where

if TYPE_CHECKING:
    from ...filters import Filter
    from .store import MilvusStore

CACHED = 8  # rules' copies kept in this process, the least recently used first out
CACHED_TOKENS = 20_000_000  # tokens they hold together (about 8 bytes each: 160 MB)
PAGE = 16_384  # rows one query of `paged` asks for at most (Milvus's limit on a query's limit)
FIRST_PAGE = 256  # rows of its first query (terms and metadata of at most 64 KiB each: at most 32 MiB)
PAGE_BYTES = 32 << 20  # characters a later page is sized to hold, by the rows read so far (well under a reply's bound)
_WORD = re.compile(r"\w+", re.UNICODE)  # Milvus's `standard` tokenizer over our terms field


def paged(store: MilvusStore, expr: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Every row matching `expr` (its id and `fields`), a page a query in primary-key order, each page the
    rows after the last id read: as pymilvus's query_iterator reads, with the `iterator` flag, without
    which Milvus Lite 3.2.2 returns a page in no order (the 2.3.5 server orders it either way); the store's
    read consistency applies (store._read). One plain query returns no more than a server allows (its
    maxOutputSize; a limit at most 16384 rows). The first page is `FIRST_PAGE` rows, each later one as
    many as `PAGE_BYTES` holds at the size of the rows read so far (at most `PAGE`): few queries, since
    Milvus Lite reads the expression over the rows after the last id at each (the id's range first)."""
    key = store.fields.id
    last: str | None = None
    size, count, limit = 0, 0, min(FIRST_PAGE, PAGE)
    while True:
        after = None if last is None else f"{key} > {json.dumps(last, ensure_ascii=False)}"
        rows = store._read("query", store._client.query, store.collection,
                           filter=" and ".join(f"({e})" for e in (after, expr) if e), output_fields=[key, *fields],
                           limit=limit, iterator="True")
        yield from rows
        if len(rows) < limit:
            return
        last = max(row[key] for row in rows)
        size += sum(len(str(v)) for row in rows for v in row.values())
        count += len(rows)
        limit = max(1, min(PAGE, PAGE_BYTES * count // max(1, size)))


def words(terms: str) -> list[str]:
    """The terms Milvus's BM25 reads from an analysed text (our terms joined by spaces)."""
    return _WORD.findall(terms.lower())


@dataclass(frozen=True)
class Lucene:
    """What bm25_visible.search reads of a bm25s model: Milvus's formula is bm25s's lucene."""

    k1: float
    b: float
    method: str = "lucene"
    idf_method: str = "lucene"
    delta: float = 0.5


class SeenText:
    """The documents one rule sees: their ids and term frequencies, by position."""

    def __init__(self, ids: list[str], terms: bm25_visible.Terms, vocabulary: dict[str, int], k1: float,
                 b: float) -> None:
        self.ids, self.vocabulary, self.model = ids, vocabulary, Lucene(k1, b)
        every = np.ones(len(ids), bool)
        self.part = bm25_visible.Part(terms, np.arange(len(ids), dtype=np.int64), every)
        self.tokens = int(terms.lengths.sum())

    @classmethod
    def read(cls, store: MilvusStore, rule: Rule) -> SeenText:
        """The terms of the documents `rule` sees (its expression, then Rule.sees), read from `store` once."""
        ft, f = store.full_text, store.fields
        if ft is None or not ft.terms_field:
            raise NotYetSupportedError(
                "a caller with a visibility rule (security.visibility) is scored with the statistics of the "
                "documents it sees, which needs our terms in Milvus: set index_backend_configs.milvus."
                "full_text_analyzer: bm25s and rebuild (retriever_index overwrite=true)")
        rows = paged(store, visible(rule, f.metadata), [ft.terms_field, f.metadata])
        vocabulary: dict[str, int] = {}
        ids, flat, lengths = [], [], []
        for row in rows:
            if not rule.sees(row[f.metadata] or {}):  # as the hits are checked (filters.visible)
                continue
            found = [vocabulary.setdefault(w, len(vocabulary)) for w in words(row[ft.terms_field] or "")]
            ids.append(row[f.id])
            flat.extend(found)
            lengths.append(len(found))
        offsets = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        terms = bm25_visible.Terms.of(np.asarray(flat, np.int32), offsets, len(vocabulary))
        return cls(ids, terms, vocabulary, ft.k1, ft.b)

    def _queries(self, analysed: Sequence[str]) -> list[list[int]]:
        """Each query's known terms, in order (a term no document it sees holds scores nothing)."""
        known = self.vocabulary
        return [[known[w] for w in words(q) if w in known] for q in analysed]

    def search(self, analysed: Sequence[str], k: int, allowed: np.ndarray | None) -> list[list[tuple[str, float]]]:
        """Per analysed query, its top `k` documents among `allowed` (a mask by position; None: all) and
        their scores, best first."""
        rows, scores = bm25_visible.search([self.part], self.model, self._queries(analysed), k, allowed)
        scale = self.model.k1 + 1  # Milvus's score is bm25s's lucene times (k1 + 1)
        return [[(self.ids[r], float(s) * scale) for r, s in zip(at.tolist(), found.tolist())]
                for at, found in zip(rows, scores)]

    def bounds(self, analysed: Sequence[str]) -> list[float]:
        """Per analysed query, the highest score its terms allow over these documents (df.py's bound)."""
        stats = bm25_visible.Statistics([self.part])
        return [bound([stats.df(t) for t in q], stats.documents, self.model.k1) for q in self._queries(analysed)]


_LOCK = threading.Lock()
_KEPT: OrderedDict[tuple[Any, ...], bm25_visible.Once[SeenText]] = OrderedDict()


def seen_text(store: MilvusStore, rule: Rule) -> SeenText:
    """The rule's copy of `store`'s documents, read at its first search after this process's last write."""
    ft = store.full_text
    where_ = (store.uri, store.collection)
    key = (*where_, store._writes, rule.key, (ft.terms_field, ft.k1, ft.b) if ft is not None else None)
    with _LOCK:
        for old in [k for k in _KEPT if k[:2] == where_ and k[2] != key[2]]:
            del _KEPT[old]  # a write made them stale
        once = _KEPT.pop(key, None) or bm25_visible.Once()
        _KEPT[key] = once
    found = once.get(lambda: SeenText.read(store, rule))
    with _LOCK:
        _evict()
    return found


def _evict() -> None:
    """The least recently used copies out, past `CACHED` or `CACHED_TOKENS` (the newest always stays)."""
    def size(once: bm25_visible.Once[SeenText]) -> int:
        value = once._value
        return value.tokens if value is not None else 0

    while len(_KEPT) > 1 and (len(_KEPT) > CACHED or sum(size(o) for o in _KEPT.values()) > CACHED_TOKENS):
        _KEPT.popitem(last=False)


def text_hits(store: MilvusStore, queries: Sequence[str], k: int, f: Filter | None, rule: Rule) -> list[list[Hit]]:
    """BM25 hits of `queries` as a collection of only the documents `rule` sees would give them (among
    those passing `f`), with their text and metadata read now (by id, checked with Rule.sees)."""
    from .store import MAX_TOP_K

    ft = store.full_text
    if ft is None:
        raise NotYetSupportedError(f"Milvus collection {store.collection!r} is searched without full_text; "
                                   "set index_backend_configs.milvus.full_text: true")
    if not 1 <= k <= MAX_TOP_K:  # as Milvus's own search (store.text_search)
        raise InvalidInputError(f"top_k must be between 1 and {MAX_TOP_K} for Milvus, got {k}")
    seen = seen_text(store, rule)
    allowed = None
    if f is not None:  # the documents passing the filter, by position (the copy holds only those it sees)
        key = store.fields.id
        passing = {row[key] for row in paged(store, where(f, None, key, store.fields.metadata) or "", [])}
        allowed = np.fromiter((i in passing for i in seen.ids), bool, len(seen.ids))
    ranked = seen.search(ft.analysed(list(queries)), k, allowed)
    wanted = sorted({i for hits in ranked for i, _ in hits})
    # by id, checked with Rule.sees here: Milvus Lite reads the rule's expression over every row (100 ms at 5k)
    docs = store.get(wanted) if wanted else {}
    return [[Hit(row=-1, id=i, text=docs[i][0], score=s, metadata=docs[i][1]) for i, s in hits
             if i in docs and rule.sees(docs[i][1])] for hits in ranked]


def bounds(store: MilvusStore, queries: Sequence[str], rule: Rule) -> list[float] | None:
    """Adaptive fusion's BM25 bound per query over the documents `rule` sees (None: no full_text)."""
    ft = store.full_text
    if ft is None:
        return None
    return seen_text(store, rule).bounds(ft.analysed(list(queries)))
