"""bm25s's analysis for Milvus's BM25 function (`index_backend_configs.milvus.full_text_analyzer: bm25s`).

Milvus's analyzers are not bm25s's: Milvus Lite 3.2.2 splits on `\\w+` and never stems, a server
uses Tantivy's tokenizers and Snowball filters. So that Milvus's BM25 scores the terms the local
BM25 index would, this server analyses every document and query itself, with the tokenizer
`backend_configs.bm25` selects (indexes/bm25.py make_tokenizer: lowercase, bm25s's stop words,
the English Snowball stemmer; jieba for Chinese; single characters), and writes the terms joined
by spaces into a VARCHAR field of their own. Milvus's analyzer on that field only splits on the
spaces again (the `standard` tokenizer: the terms are runs of word characters already), its
BM25 function turns them into the sparse vector, and a query's terms are sent the same way. The
text field keeps the document as it was, for hits.

What still differs from bm25s (bench/RESULTS.md "fulltext-scifact" measures it): Milvus's score
is Lucene's BM25 with the (k1 + 1) factor bm25s's `lucene` leaves out (the same ranking), and
Milvus Lite keeps N, avgdl and document frequencies per segment, not per collection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...config import BM25Config

STEMS_KEPT = 1_000_000  # words whose stems are remembered (a bound on memory: about 100 MB)


class Terms:
    """A text's bm25s terms as one space-separated string (callable; thread-safe enough: a lost
    cache entry is stemmed again)."""

    def __init__(self, cfg: BM25Config) -> None:
        from ..bm25 import make_tokenizer

        tokenizer = make_tokenizer(cfg)
        self._split = tokenizer.splitter
        self._lower = bool(tokenizer.lower)
        self._stop = frozenset(tokenizer.stopwords or ())
        self._stem: Any = tokenizer.stemmer
        self._stems: dict[str, str] = {}

    def words(self, text: str) -> list[str]:
        """The terms bm25s indexes for `text`, in order (stop words out, stems in)."""
        words = [w for w in self._split(text.lower() if self._lower else text) if w not in self._stop]
        if self._stem is None:
            return words
        stems = self._stems
        if len(stems) > STEMS_KEPT:
            stems.clear()
        out = []
        for w in words:
            s = stems.get(w)
            if s is None:
                s = stems[w] = self._stem(w)
            out.append(s)
        return out

    def __call__(self, text: str) -> str:
        return " ".join(self.words(text))

    def many(self, texts: Sequence[str]) -> list[str]:
        return [self(t) for t in texts]
