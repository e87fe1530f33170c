"""BM25 scored with the statistics of the documents one caller sees (security.visibility, issue 47).

The saved index holds bm25s's weights: each term's idf and each document's length normalisation are
the whole collection's (N, the average length, the term's document frequency), so a document a caller
may not see would move the scores of those it sees, and tell it, say, that a rare word of the query
exists in hidden text. For such a caller (`BM25Index.search` with `seen`) the query's terms are scored
again from their term frequencies and the documents' lengths, with N, the average length and each
term's document frequency counted over the documents it sees (live ones only): the scores an index of
only those documents gives. bm25s's own formulas, its float32 idf and weights and its float32 sums in
query order, so they are equal to the last bit (tests/test_visibility_scores.py).

Where the frequencies come from: the delta (documents added since the build) keeps its own; the base's
are tokenized once from the collection's texts at the first such search (as a build tokenizes them,
without the scoring) and kept with the index, shared by the snapshots that grow its delta.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from .bm25_tokens import CompactIds, extended
from .topk import top_kept

T = TypeVar("T")


class Terms:
    """Term frequencies and lengths of some documents, by position: a term-major matrix over the
    tokenizer's ids (a term's row: the documents holding it and how often, float32 as bm25s counts)
    and each document's length in tokens."""

    def __init__(self, tf: Any, lengths: np.ndarray) -> None:
        self.tf, self.lengths = tf, np.asarray(lengths, dtype=np.int64)

    @classmethod
    def of(cls, flat: np.ndarray, offsets: np.ndarray, vocabulary: int) -> Terms:
        """From every document's token ids (one flat array and its offsets, as CompactIds keeps them)."""
        import scipy.sparse as sp

        lengths = np.diff(offsets)
        docs = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
        tf = sp.csr_matrix((np.ones(len(flat), np.float32), (flat, docs)), shape=(vocabulary, len(lengths)))
        tf.sum_duplicates()
        return cls(tf, lengths)

    def postings(self, token: int, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The seen documents (positions) holding `token`, and how often each holds it."""
        if token >= self.tf.shape[0]:
            return np.empty(0, np.int32), np.empty(0, np.float32)
        lo, hi = self.tf.indptr[token], self.tf.indptr[token + 1]
        docs, tf = self.tf.indices[lo:hi], self.tf.data[lo:hi]
        kept = seen[docs]
        return docs[kept], tf[kept]


class Once(Generic[T]):
    """A value made at its first use, once, and shared by whoever holds this."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: T | None = None

    def get(self, make: Callable[[], T]) -> T:
        with self._lock:
            if self._value is None:
                self._value = make()
            return self._value


@dataclass(frozen=True)
class Part:
    """The base or the delta: its terms, the collection row of each position, and which positions the
    caller sees."""

    terms: Terms
    rows: np.ndarray
    seen: np.ndarray


def parts(seen: np.ndarray, texts: Callable[[list[int]], Iterable[str]] | None, tokenizer: Any, base_rows: np.ndarray,
          base_terms: Once[Terms], delta: Any | None) -> list[Part]:
    """The base (its collection rows `base_rows`) and the delta (bm25.py's Delta, or None) with their term
    frequencies and which of their documents `seen` holds; the base's tokenized from `texts` (the
    collection's, by row) with the build's `tokenizer` the first time, and kept in `base_terms`."""
    if texts is None:
        raise ValueError("a search with `seen` needs `texts`: the base's term frequencies come from its documents")

    def tokenized() -> Terms:
        grown = extended(tokenizer)  # as the build tokenized them: no id is added
        ids = CompactIds.tokenize(grown, texts(base_rows.tolist()), update_vocab=False)
        return Terms.of(ids.flat, ids.offsets, max(grown.get_vocab_dict().values(), default=-1) + 1)

    out = [Part(base_terms.get(tokenized), base_rows, seen[base_rows])]
    if delta is not None:
        out.append(Part(delta.terms, delta.rows, seen[delta.rows]))
    return out


class Statistics:
    """N, the average length and the document frequencies over the seen documents of `parts`."""

    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = parts
        lengths = np.concatenate([p.terms.lengths[p.seen] for p in parts])
        self.documents = len(lengths)
        # bm25s's own: the mean of an integer array (exact sums, so the order of the documents is no matter)
        self.avgdl = lengths.mean() if len(lengths) else np.float64(0.0)
        self._postings: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def postings(self, token: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per part, the seen documents holding `token` and their term frequencies."""
        found = self._postings.get(token)
        if found is None:
            found = self._postings[token] = [p.terms.postings(token, p.seen) for p in self.parts]
        return found

    def df(self, token: int) -> int:
        return sum(len(docs) for docs, _ in self.postings(token))


def search(parts: Sequence[Part], model: Any, queries: Sequence[list[int]], k: int,
           allowed: np.ndarray | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per query (token ids): the collection rows of its top `k` seen documents among `allowed` (a mask
    over collection rows; None: every seen one), best first, ties in row order, and their scores."""
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    stats = Statistics(parts)
    idf_of, tfc = _select_idf_scorer(model.idf_method), _select_tfc_scorer(model.method)
    params = {"k1": model.k1, "b": model.b, "delta": model.delta}
    nonoccurrence = model.method in ("bm25l", "bm25+")
    masks = [p.seen if allowed is None else p.seen & allowed[p.rows] for p in parts]
    rows_out, scores_out = [], []
    for token_ids in queries:
        adds: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in parts]
        absent: list[np.float32] = []  # bm25l, bm25+: each term's score at tf 0, which every document gets
        for t in token_ids:  # in query order, a repeated term each time (bm25s's sums)
            df = stats.df(t)
            if df == 0:  # no seen document holds it: as a term an index of them never saw
                continue
            idf = idf_of(df, N=stats.documents)
            weight = np.float32(idf)  # bm25s keeps the idf of a term in float32
            zero = np.float32(idf * tfc(tf_array=0, l_d=stats.avgdl, l_avg=stats.avgdl, **params)) if nonoccurrence \
                else None
            if zero is not None:
                absent.append(zero)
            for i, (docs, tf) in enumerate(stats.postings(t)):
                w = weight * tfc(tf_array=tf, l_d=parts[i].terms.lengths[docs], l_avg=stats.avgdl, **params)
                adds[i].append((docs, (w if zero is None else w - zero).astype(np.float32)))
        rows, found = [], []
        for part, mask, part_adds in zip(parts, masks, adds):
            scores, keep = np.zeros(len(part.rows), np.float32), np.zeros(len(part.rows), bool)
            if part_adds:
                docs = np.concatenate([d for d, _ in part_adds])
                np.add.at(scores, docs, np.concatenate([w for _, w in part_adds]))
                keep[docs] = True
            if absent:
                scores += np.asarray(absent, np.float32).sum()
            at, best = top_kept(scores, keep, mask, k)
            rows.append(part.rows[at])
            found.append(best)
        merged_rows, merged = np.concatenate(rows), np.concatenate(found)
        order = np.lexsort((merged_rows, -merged))[:k]  # ties in row order, as one index gives them
        rows_out.append(merged_rows[order].astype(np.int64, copy=False))
        scores_out.append(merged[order])
    return rows_out, scores_out
