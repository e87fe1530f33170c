"""BM25 over bm25s: English stopwords + Snowball stemming by default, jieba for `lang: zh`.

The index and its tokenizer vocabulary are saved together, so a query is tokenized with the
vocabulary the corpus was indexed with, in the process that built it and after a reload.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import BM25Config
from .errors import IndexMismatchError, MissingDependencyError
from .persist import publish, read_manifest
from .ranking import top_k

_WORD = re.compile(r"\w", re.UNICODE)


def _jieba_split(text: str) -> list[str]:
    try:
        import jieba
    except ImportError as e:
        raise MissingDependencyError("jieba", "mcp-retriever[zh]") from e
    return [w for w in jieba.lcut(text) if _WORD.search(w)]


def _characters(text: str) -> list[str]:
    return [c for c in text if _WORD.match(c)]


def tokenizer_name(cfg: BM25Config) -> str:
    """The tokenizer `cfg` selects (UltraRAG's names): auto is jieba for zh, default otherwise."""
    if cfg.tokenizer == "auto":
        return "jieba" if cfg.lang == "zh" else "default"
    return cfg.tokenizer


def make_tokenizer(cfg: BM25Config) -> Any:
    """default: bm25s's word splitter (English: stopwords and Snowball stemming); jieba: Chinese
    words; character: every letter or CJK character a term. zh uses Chinese stopwords."""
    from bm25s.tokenization import Tokenizer

    name = tokenizer_name(cfg)
    if cfg.lang == "zh":
        from bm25s.stopwords import STOPWORDS_CHINESE

        stopwords: Any = list(STOPWORDS_CHINESE)
    else:
        stopwords = "en"
    if name == "jieba":
        return Tokenizer(lower=True, splitter=_jieba_split, stopwords=stopwords, stemmer=None)
    if name == "character":
        return Tokenizer(lower=True, splitter=_characters, stopwords=stopwords, stemmer=None)
    if cfg.lang == "zh":
        return Tokenizer(lower=True, stopwords=stopwords, stemmer=None)
    import Stemmer

    return Tokenizer(lower=True, stopwords=stopwords, stemmer=Stemmer.Stemmer("english"))


class CompactIds(Sequence[list[int]]):
    """Every document's token ids in one int32 array (with offsets), tokenized a chunk of texts at
    a time: the corpus's texts and per-document Python lists (about ten times the bytes) are never
    all in memory. bm25s reads it as the list of lists it takes."""

    CHUNK = 20_000

    def __init__(self, flat: np.ndarray, offsets: np.ndarray) -> None:
        self.flat, self.offsets = flat, offsets

    @classmethod
    def tokenize(cls, tokenizer: Any, texts: Iterable[str]) -> CompactIds:
        import itertools

        parts, lengths = [], []
        it = iter(texts)
        while chunk := list(itertools.islice(it, cls.CHUNK)):
            docs = tokenizer.tokenize(chunk, update_vocab=True, return_as="ids", show_progress=False)
            lengths.append(np.fromiter(map(len, docs), dtype=np.int64, count=len(docs)))
            parts.append(np.fromiter(itertools.chain.from_iterable(docs), dtype=np.int32))
        offsets = np.zeros(sum(map(len, lengths)) + 1, dtype=np.int64)
        if lengths:
            np.cumsum(np.concatenate(lengths), out=offsets[1:])
        return cls(np.concatenate(parts) if parts else np.empty(0, np.int32), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.flat[self.offsets[i] : self.offsets[i + 1]].tolist()

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))


class Tokens:
    """What bm25s's `index` takes: an object with `ids` (per document) and `vocab` (term -> id)."""

    def __init__(self, ids: CompactIds, vocab: dict[str, int]) -> None:
        self.ids, self.vocab = ids, vocab


class BM25Index:
    kind = "bm25"

    def __init__(self, model: Any, tokenizer: Any, manifest: dict[str, Any], rows: np.ndarray | None = None) -> None:
        self._model = model
        self._rows = rows  # index position -> collection row; None: the same number
        self._tokenizer = tokenizer
        self.manifest = manifest
        # Tokenizer id -> column of the model's score matrix (-1: not in the index), built once,
        # so a query is tokenized to ids and looked up without a per-query reverse vocabulary.
        vocab = tokenizer.get_vocab_dict()
        self._column = np.full(max(vocab.values(), default=-1) + 1, -1, dtype=np.int64)
        for term, token_id in vocab.items():
            self._column[token_id] = model.vocab_dict.get(term, -1)

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
        params = {"lang": cfg.lang, "tokenizer": tokenizer_name(cfg), "method": cfg.method, "k1": cfg.k1, "b": cfg.b}
        return cls(model, tokenizer, params, rows)

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
        return int(self._model.scores["num_docs"])

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
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

    def search(self, queries: Sequence[str], k: int,
               allowed: np.ndarray | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per query: rows best first and their scores, at most k; documents that share no
        term with the query are not results, so a query of unknown words finds none.
        `allowed` (a boolean mask over rows) zeroes every other row before the top k is taken."""
        tokens = self._tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
        if allowed is not None and self._rows is not None:
            allowed = allowed[self._rows]
        rows_out, scores_out = [], []
        for token_ids in tokens:
            columns = self._column[np.asarray(token_ids, dtype=np.int64)] if token_ids else np.empty(0, np.int64)
            columns = columns[columns >= 0].tolist()
            scores = self._model.get_scores_from_ids(columns) if columns else np.zeros(len(self), np.float32)
            # A result shares a term with the query. Not `score > 0`: bm25l and bm25+ give every
            # document a positive score, matching or not.
            keep = self._matching(columns, len(scores))
            if allowed is not None:
                keep &= allowed[: len(scores)]
            rows = top_k(np.where(keep, scores, -np.inf), k)
            rows = rows[keep[rows]]
            rows_out.append(rows if self._rows is None else self._rows[rows])
            scores_out.append(scores[rows])
        return rows_out, scores_out
