"""The unit of `chunking.by: token`: how many of the embedding model's tokens (word pieces) each
word of a text is, so that a chunk fits the model's window instead of being cut at it.

Counted with the model's own tokenizer.json through `tokenizers` (no torch), one distinct word at
a time and remembered: a WordPiece tokenizer never joins pieces across white space, so a text's
count is the sum of its words' counts (a byte-level BPE one adds a piece here and there). A model
whose tokenizer.json is neither in its folder nor in the local hub cache, or that this process
does not run (Infinity, OpenAI, backend bm25), is counted by its words and punctuation marks, the
pieces any BERT tokenizer cuts first: fewer than its tokens, so such chunks can run past `length`.
A word is never cut: one heavier than `length` (a long URL, text written without spaces) is a
chunk of its own.
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
from ..errors import MissingDependencyError

log = logging.getLogger(__name__)
_MARKS = re.compile(r"\w+|[^\w\s]")
KEEP = 200_000  # distinct words remembered; past it the memory starts again


class Pieces:
    """`pieces(words)` -> each word's count of model tokens (no special tokens). Safe to share
    between threads: a call answers from what it looked up itself, and a full memory is replaced,
    never emptied under another call."""

    def __init__(self, tokenizer: Any = None, name: str = "") -> None:
        self._tk = tokenizer
        self.name = name  # what counts: the tokenizer's folder, or "" for words and marks
        self._known: dict[str, int] = {}

    def __call__(self, words: Sequence[str]) -> list[int]:
        if self._tk is None:
            return [len(_MARKS.findall(w)) or 1 for w in words]
        known = self._known
        got = {w: known.get(w, 0) for w in set(words)}
        new = [w for w, n in got.items() if not n]
        if new:
            counts = [len(e.ids) or 1 for e in self._tk.encode_batch(new, add_special_tokens=False)]
            got.update(zip(new, counts, strict=True))
            if len(known) + len(new) > KEEP:
                self._known = known = {}
            known.update(zip(new, counts, strict=True))
        return [got[w] for w in words]


@lru_cache(maxsize=4)
def _pieces(folder: str) -> Pieces:
    path = Path(folder) / "tokenizer.json" if folder else None
    if path is not None and not path.is_file():
        path = _hub_cached(folder)
    if path is not None:
        from tokenizers import Tokenizer

        tk = Tokenizer.from_file(str(path))
        tk.no_truncation()
        tk.no_padding()
        return Pieces(tk, folder)
    if folder:
        log.warning("chunking by token: no tokenizer.json for %r here; counting words and punctuation marks, "
                    "fewer than its tokens (chunks may run past the model's window)", Path(folder).name)
    return Pieces()


def _hub_cached(name: str) -> Path | None:
    """A hub model's tokenizer.json where the local hub cache has it (nothing is downloaded)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(name, "tokenizer.json")
    except Exception:  # noqa: BLE001 - a name that is no hub id, say
        return None
    return Path(found) if isinstance(found, str) else None


def pieces_for(cfg: Config, chunking: ChunkingConfig) -> Pieces | None:
    """The counter `chunking` needs with `cfg`'s model, or None when it does not cut by token. A
    model this process does not run (a server's, or none: backend bm25) is counted by its words and
    punctuation marks, as is one whose files are not here."""
    if chunking.by != "token":
        return None
    if cfg.backend != "sentence_transformers":
        return _pieces("")
    try:
        return _pieces(cfg.resolved_model())
    except MissingDependencyError:  # the packaged model is not installed (a lean install)
        return _pieces("")
