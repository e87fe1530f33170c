"""BM25 over bm25s: English stopwords + Snowball stemming by default, jieba for `lang: zh`.

The index and its tokenizer vocabulary are saved together, so a query is tokenized with the
vocabulary the corpus was indexed with, in the process that built it and after a reload.

Adds and deletes without a rebuild: the saved index (the base) stays as bm25_index built it, and
the documents added since are a delta (`Delta`) scored at query time.

Statistics follow Lucene's choice: base documents keep the N, document frequencies and average
length of their build, and a deleted document stays in those statistics (masked out of results)
until the next full build; added documents are scored with the statistics of base and delta
together, with bm25s's own term-frequency and idf formulas of the configured method. Nothing of
the delta is saved: the change log holds the added texts, and the delta is tokenized again at
start. When the documents added or deleted since the build pass `rebuild_fraction` of the base,
the next change (or start) rebuilds the base over the live documents and saves it. A caller that
sees only some documents (security.visibility) is scored with the statistics of those alone instead
(`search(..., seen=)`, bm25_visible.py).

Adding 1,000 documents to a 1M-document base tokenizes those 1,000, not the million (0.9 s against
a 92 s rebuild: bench/RESULTS.md "Adds at scale"); a restart tokenizes the delta again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import BM25Config
from ..errors import IndexMismatchError
from ..store.persist import publish, read_manifest
from . import bm25_visible
from .bm25_tokens import CompactIds, Tokens, make_tokenizer, tokenizer_name
from .bm25_tokens import extended as _extended
from .topk import top_kept

Texts = Callable[[list[int]], Iterable[str]]  # the collection's texts of rows


class BM25Index:
    kind = "bm25"

    def __init__(self, model: Any, tokenizer: Any, manifest: dict[str, Any], rows: np.ndarray | None = None,
                 delta: Delta | None = None, positive: bool | None = None,
                 base_terms: bm25_visible.Once[bm25_visible.Terms] | None = None) -> None:
        self._model = model
        self._rows = rows  # index position -> collection row; None: the same number
        self._tokenizer = tokenizer
        self.manifest = manifest
        self.delta = delta  # documents added since the build (Delta, below)
        # Tokenizer id -> column of the model's score matrix (-1: not in the index), built once,
        # so a query is tokenized to ids and looked up without a per-query reverse vocabulary.
        vocab = tokenizer.get_vocab_dict()
        self._columns = [-1] * (max(vocab.values(), default=-1) + 1)
        for term, token_id in vocab.items():
            self._columns[token_id] = model.vocab_dict.get(term, -1)
        self._positive = positive
        # the base's term frequencies, for a caller that sees only some documents (bm25_visible.py)
        self._base_terms = base_terms if base_terms is not None else bm25_visible.Once()

    @property
    def positive(self) -> bool:
        """Whether a score is above 0 exactly where the document shares a term with the query: no
        score for an absent term (not bm25l or bm25+) and every stored term score above 0 (not a
        robertson or atire idf of a term in most or all documents). Then `score > 0` is `_matching`
        without reading the postings: a sum of float32 numbers above 0 is above 0."""
        if self._positive is None:
            data = self._model.scores["data"]
            self._positive = self._model.method not in ("bm25l", "bm25+") and not bool(len(data) and data.min() <= 0)
        return self._positive

    @classmethod
    def build(cls, texts: Iterable[str], cfg: BM25Config, show_progress: bool = True,
              rows: np.ndarray | None = None) -> BM25Index:
        """Index `texts`; `rows` names the collection row of each (default: 0, 1, 2...)."""
        import bm25s

        tokenizer = make_tokenizer(cfg)
        ids = CompactIds.tokenize(tokenizer, texts)
        model = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
        # the model keeps the tokenizer's vocabulary
        model.index(Tokens(ids, tokenizer.get_vocab_dict()), show_progress=show_progress)
        params = {"lang": cfg.lang, "tokenizer": tokenizer_name(cfg), "method": cfg.method, "k1": cfg.k1, "b": cfg.b,
                  "avgdl": float(ids.offsets[-1]) / max(len(ids), 1)}
        return cls(model, tokenizer, params, rows)

    # -- what a delta (Delta, below) reads of its base -------------------------------------------

    model = property(lambda self: self._model)
    tokenizer = property(lambda self: self._tokenizer)
    documents = property(lambda self: int(self._model.scores["num_docs"]))  # the base's, deleted or not
    avgdl = property(lambda self: self.manifest.get("avgdl"))  # None: built before it was recorded

    def df(self, token_id: int) -> int:
        """Base documents holding the token (the tokenizer's id; 0 for one the base never saw)."""
        column = self._columns[token_id] if token_id < len(self._columns) else -1
        indptr = self._model.scores["indptr"]
        return 0 if column < 0 else int(indptr[column + 1] - indptr[column])

    def with_added(self, texts: Iterable[str], rows: np.ndarray) -> BM25Index:
        """This index with documents `texts` (at collection `rows`) in its delta; no copy of the base."""
        return BM25Index(self._model, self._tokenizer, self.manifest, self._rows,
                         Delta.grown(self, self.delta, texts, rows), self._positive, self._base_terms)

    def base_rows(self) -> np.ndarray:
        """The collection rows the base covers, by position."""
        return self._rows if self._rows is not None else np.arange(self.documents, dtype=np.int64)

    def bounds(self, queries: Sequence[str], seen: np.ndarray | None = None, texts: Texts | None = None) -> list[float]:
        """Per query, the highest BM25 score a document could reach: the sum over its known terms
        of idf times the method's largest term-frequency component (1 for lucene and robertson,
        k1 + 1 for atire and bm25l, k1 + 1 + delta for bm25+). Adaptive fusion divides by it.
        `seen` (a mask over collection rows; `texts` reads them): the idf of the documents it holds
        only, as in `search`."""
        from bm25s.scoring import _select_idf_scorer

        m, delta = self._model, self.delta
        idf = _select_idf_scorer(m.idf_method)
        sup = {"lucene": 1.0, "robertson": 1.0, "atire": m.k1 + 1, "bm25l": m.k1 + 1}.get(m.method, m.k1 + 1 + m.delta)
        stats = None if seen is None else bm25_visible.Statistics(self._parts(seen, texts))
        out = []
        for token_ids in self._tokenized(queries):
            if stats is not None:
                dfs, n = [stats.df(t) for t in token_ids], stats.documents
            else:
                dfs, n = [self.df(t) + (delta.df(t) if delta is not None else 0) for t in token_ids], len(self)
            out.append(sup * math.fsum(idf(df, N=n) for df in dfs if df > 0))
        return out

    def _parts(self, seen: np.ndarray, texts: Texts | None) -> list[bm25_visible.Part]:
        """The base and the delta as a restricted caller's parts (bm25_visible.parts)."""
        return bm25_visible.parts(seen, texts, self._tokenizer, self.base_rows(), self._base_terms, self.delta)

    def _tokenized(self, queries: Sequence[str]) -> list[list[int]]:
        """Queries as token ids, with the delta's vocabulary when there is one (it holds the base's)."""
        tokenizer = self.delta.tokenizer if self.delta is not None else self._tokenizer
        # "stream": the ids of return_as="ids" without its progress bar object (20 us a call)
        out = list(tokenizer.tokenize(list(queries), update_vocab=False, return_as="stream"))
        # bm25s gives an unknown word, and a document with no word, the empty string's id: a query
        # of unknown words would match the documents with no word (a text of digits, say)
        empty = tokenizer.get_vocab_dict().get("")
        return out if empty is None else [[t for t in ids if t != empty] for ids in out]

    def live_documents(self, live: np.ndarray) -> int:
        """Documents of this index still live (`live`: the collection's mask over rows)."""
        delta = int(np.count_nonzero(live[self.delta.rows])) if self.delta is not None else 0
        return int(np.count_nonzero(live[self.base_rows()])) + delta

    @classmethod
    def load(cls, folder: Path, cfg: BM25Config) -> BM25Index | None:
        import bm25s

        manifest = read_manifest(folder)
        if manifest is None:
            return None
        if manifest.get("kind") != cls.kind:
            raise IndexMismatchError(f"{folder} holds a {manifest.get('kind')!r} index, not bm25")
        built = manifest.get("lang"), manifest.get("tokenizer", "jieba" if manifest.get("lang") == "zh" else "default")
        wanted = cfg.lang, tokenizer_name(cfg)
        if built != wanted:
            raise IndexMismatchError(
                f"{folder} was built for lang {built[0]!r} with the {built[1]!r} tokenizer, the config says "
                f"{wanted[0]!r} and {wanted[1]!r}; call bm25_index(overwrite=true) to rebuild")
        data = folder / manifest["data"]
        model = bm25s.BM25.load(str(data), show_progress=False)
        tokenizer = make_tokenizer(cfg)
        tokenizer.load_vocab(str(data))
        rows = np.load(data / "rows.npy") if (data / "rows.npy").is_file() else None
        return cls(model, tokenizer, manifest, rows)

    def __len__(self) -> int:
        """Documents indexed: the base's and the delta's (deleted ones are masked at search)."""
        return self.documents + (len(self.delta) if self.delta is not None else 0)

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        if self.delta is not None:
            raise ValueError("a BM25 index with a delta is not saved: the change log holds the added documents")

        def write(path: Path) -> None:
            self._model.save(str(path), show_progress=False)
            self._tokenizer.save_vocab(str(path))
            if self._rows is not None:
                np.save(path / "rows.npy", self._rows)

        self.manifest = publish(folder, {**manifest, **self.manifest, "kind": self.kind}, write)

    def _matching(self, columns: list[int], n: int) -> np.ndarray:
        """Documents that contain at least one of the vocabulary columns (bm25s's postings)."""
        postings = self._model.scores
        indptr, indices = postings["indptr"], postings["indices"]
        mask = np.zeros(n, dtype=bool)
        for c in columns:
            mask[indices[indptr[c] : indptr[c + 1]]] = True
        return mask

    def _scores(self, columns: list[int]) -> np.ndarray:
        """bm25s's `get_scores_from_ids(columns)` (bm25s's own for bm25l and bm25+): its `np.add.at`
        per query term as one over the terms' postings joined in query order, so a document's float32
        sum adds the same numbers in the same order (test_bm25s_internals.py), in two thirds of the time."""
        m = self._model
        if m.method in ("bm25l", "bm25+"):
            return m.get_scores_from_ids(columns)
        postings = m.scores
        indptr, indices, data = postings["indptr"], postings["indices"], postings["data"]
        at = np.asarray(columns, dtype=np.int64)
        spans = [slice(a, b) for a, b in zip(indptr[at].tolist(), indptr[at + 1].tolist())]
        scores = np.zeros(int(postings["num_docs"]), dtype=m.dtype)
        np.add.at(scores, np.concatenate([indices[s] for s in spans]), np.concatenate([data[s] for s in spans]))
        return scores

    def search(self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, seen: np.ndarray | None = None,
               texts: Texts | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per query: rows best first and their scores, at most k; documents that share no
        term with the query are not results, so a query of unknown words finds none.
        `allowed` (a boolean mask over rows) zeroes every other row before the top k is taken.
        `seen` (a mask over rows: the documents a caller may see, `allowed` within it; `texts` reads
        the collection's by row): scored with the statistics of those documents alone (bm25_visible.py)."""
        if seen is not None:
            return bm25_visible.search(self._parts(seen, texts), self._model, self._tokenized(queries), k, allowed)
        delta, known, n = self.delta, self._columns, len(self._columns)
        mask = allowed if allowed is None or self._rows is None else allowed[self._rows]
        delta_mask = None if allowed is None or delta is None else allowed[delta.rows]
        rows_out, scores_out = [], []
        for token_ids in self._tokenized(queries):
            columns = [c for t in token_ids if t < n and (c := known[t]) >= 0]
            if columns:
                scores = self._scores(columns)
                # A result shares a term with the query. Not `score > 0` where bm25l and bm25+ give
                # every document a positive score, matching or not (`positive`).
                keep = scores > 0 if self.positive else self._matching(columns, len(scores))
                rows, found = top_kept(scores, keep, mask, k)
                rows = rows if self._rows is None else self._rows[rows]
            else:
                rows, found = np.empty(0, np.int64), np.empty(0, np.float32)
            if delta is not None:  # its own top k, merged: ties in row order, as one index would give
                more, more_found = top_kept(*delta.scores(token_ids), delta_mask, k)
                rows, found = np.concatenate([rows, delta.rows[more]]), np.concatenate([found, more_found])
                order = np.lexsort((rows, -found))[:k]
                rows, found = rows[order], found[order]
            rows_out.append(rows)
            scores_out.append(found)
        return rows_out, scores_out


def _joined(a: CompactIds, b: CompactIds) -> CompactIds:
    return CompactIds(np.concatenate([a.flat, b.flat]), np.concatenate([a.offsets, b.offsets[1:] + a.offsets[-1]]))


class Delta:
    """The documents added since the base was built: their token ids (in `tokenizer`'s space, a
    superset of the base's), their collection rows, and a term-major matrix of term frequencies."""

    def __init__(self, tokenizer: Any, ids: CompactIds, rows: np.ndarray, base: BM25Index) -> None:
        import scipy.sparse as sp

        self.tokenizer, self.ids, self.rows = tokenizer, ids, rows
        n = len(ids)
        lengths = np.diff(ids.offsets)
        vocab = max(tokenizer.get_vocab_dict().values(), default=-1) + 1
        docs = np.repeat(np.arange(n, dtype=np.int32), lengths)
        tf = sp.csr_matrix((np.ones(len(ids.flat), np.float32), (ids.flat, docs)), shape=(vocab, n))
        tf.sum_duplicates()
        self.tf = tf
        self.dl = lengths.astype(np.float32)
        self.terms = bm25_visible.Terms(tf, lengths)  # for a caller that sees only some documents
        model = base.model
        self.n_all = int(base.documents) + n
        self.avgdl = (float(base.avgdl) * int(base.documents) + float(lengths.sum())) / max(self.n_all, 1)
        self._base = base
        from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

        self._idf, self._tfc = _select_idf_scorer(model.idf_method), _select_tfc_scorer(model.method)
        self._k1, self._b, self._delta = model.k1, model.b, model.delta
        self._nonoccurrence = model.method in ("bm25l", "bm25+")

    @classmethod
    def grown(cls, base: BM25Index, before: Delta | None, texts: Iterable[str], rows: np.ndarray) -> Delta:
        """`before` (None: an empty delta over `base`) with the documents `texts` at `rows` added."""
        tokenizer = _extended(before.tokenizer if before is not None else base.tokenizer)
        new = CompactIds.tokenize(tokenizer, texts)
        if before is None:
            return cls(tokenizer, new, np.asarray(rows, np.int64), base)
        return cls(tokenizer, _joined(before.ids, new), np.concatenate([before.rows, np.asarray(rows, np.int64)]), base)

    def __len__(self) -> int:
        return len(self.rows)

    def df(self, token_id: int) -> int:
        """Delta documents holding the token."""
        indptr = self.tf.indptr
        return int(indptr[token_id + 1] - indptr[token_id]) if token_id < self.tf.shape[0] else 0

    def scores(self, token_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Per delta document: its BM25 score for the query's token ids, and whether it shares a
        term with the query (bm25s's sums: a repeated query term counts each time)."""
        n = len(self)
        scores, keep = np.zeros(n, np.float32), np.zeros(n, bool)
        indptr, indices, data = self.tf.indptr, self.tf.indices, self.tf.data
        for t in token_ids:
            if t >= self.tf.shape[0]:
                continue
            lo, hi = indptr[t], indptr[t + 1]
            df = self._base.df(t) + (hi - lo)
            if df == 0:
                continue
            idf = self._idf(df, N=self.n_all)
            docs = indices[lo:hi]
            s = idf * self._tfc(tf_array=data[lo:hi], l_d=self.dl[docs], l_avg=self.avgdl, k1=self._k1, b=self._b,
                                delta=self._delta)
            if self._nonoccurrence:  # every document gets the term's score at tf 0; those with it, the rest
                absent = idf * self._tfc(tf_array=0, l_d=self.avgdl, l_avg=self.avgdl, k1=self._k1, b=self._b,
                                         delta=self._delta)
                scores += np.float32(absent)
                s = s - absent
            scores[docs] += s.astype(np.float32)
            keep[docs] = True
        return scores, keep
