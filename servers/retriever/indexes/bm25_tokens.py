"""BM25's text to token ids (bm25s's Tokenizer): the tokenizer the config selects, every document's ids
in one compact array, and a copy of a tokenizer whose vocabulary grows on its own.

The index (bm25.py), its delta and the scoring for a caller who sees only some documents
(bm25_visible.py) all tokenize through here, with the vocabulary the corpus was indexed with.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..config import BM25Config
from ..errors import MissingDependencyError

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
    def tokenize(cls, tokenizer: Any, texts: Iterable[str], update_vocab: bool = True) -> CompactIds:
        import itertools

        parts, lengths = [], []
        it = iter(texts)
        while chunk := list(itertools.islice(it, cls.CHUNK)):
            docs = tokenizer.tokenize(chunk, update_vocab=update_vocab, return_as="ids", show_progress=False)
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


def extended(tokenizer: Any) -> Any:
    """A copy whose vocabulary can grow without touching the original (searches of the older
    snapshot keep tokenizing with it)."""
    out = copy.copy(tokenizer)
    out.word_to_stem, out.stem_to_sid, out.word_to_id = (
        dict(tokenizer.word_to_stem), dict(tokenizer.stem_to_sid), dict(tokenizer.word_to_id))
    return out
