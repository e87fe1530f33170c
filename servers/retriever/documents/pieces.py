"""The unit of `chunking.by: token`: how many of the embedding model's tokens (word pieces) each
word of a text is, so that a chunk fits the model's window instead of being cut at it.

Counted with the model's own tokenizer.json through `tokenizers` (no torch), one distinct word at
a time and remembered: a WordPiece tokenizer never joins pieces across white space, so a text's
count is the sum of its words' counts (a byte-level BPE one adds a piece here and there). A model
whose tokenizer is not on this machine (a server's model: Infinity, OpenAI) is counted by its
words and punctuation marks, the pieces any BERT tokenizer cuts first (never more than it gives).
On SciFact (bench/RESULTS.md, section chunk-units) 28% of the chunks of 150 words were
longer than MiniLM's 256, whose tail no dense search ever saw; chunks of 128 tokens were none."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import ChunkingConfig, Config

log = logging.getLogger(__name__)
_MARKS = re.compile(r"\w+|[^\w\s]")
KEEP = 1_000_000  # distinct words remembered; past it the memory starts again


class Pieces:
    """`pieces(words)` -> each word's count of model tokens (no special tokens)."""

    def __init__(self, tokenizer: Any = None, name: str = "") -> None:
        self._tk = tokenizer
        self.name = name  # what counts: the tokenizer's folder, or "" for words and marks
        self._known: dict[str, int] = {}

    def __call__(self, words: Sequence[str]) -> list[int]:
        if self._tk is None:
            return [len(_MARKS.findall(w)) or 1 for w in words]
        known = self._known
        new = list({w for w in words if w not in known})
        if new:
            if len(known) + len(new) > KEEP:
                known.clear()
            known.update(zip(new, (len(e.ids) or 1 for e in self._tk.encode_batch(new, add_special_tokens=False)),
                             strict=True))
        return [known[w] for w in words]


@lru_cache(maxsize=4)
def _pieces(folder: str) -> Pieces:
    path = Path(folder) / "tokenizer.json"
    if folder and path.is_file():
        from tokenizers import Tokenizer

        tk = Tokenizer.from_file(str(path))
        tk.no_truncation()
        tk.no_padding()
        return Pieces(tk, folder)
    log.info("chunking by token: no tokenizer.json for %r here; counting words and punctuation marks instead",
             Path(folder).name)
    return Pieces()


def pieces_for(cfg: Config, chunking: ChunkingConfig) -> Pieces | None:
    """The counter `chunking` needs with `cfg`'s model, or None when it does not cut by token."""
    if chunking.by != "token":
        return None
    if cfg.backend in ("infinity", "openai"):  # the model runs elsewhere
        return _pieces("")
    return _pieces(cfg.resolved_model())
