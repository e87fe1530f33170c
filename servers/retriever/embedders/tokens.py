"""The exported model's tokenizer without transformers: `tokenizers` (Rust) reads the export's
tokenizer.json. transformers imports torch whenever torch is installed, so a query path that goes
through it carries torch (hundreds of MB, about a second); this one does not. A model whose
tokenizer has no tokenizer.json (a slow, Python-only tokenizer) falls back to transformers."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _token(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class Tokens:
    """`tokens(texts)` -> token ids per text, special tokens added, cut at `max_length`;
    `pad_id` fills the rest of a batch."""

    def __init__(self, folder: Path, max_length: int) -> None:
        self._max_length = max_length
        try:
            config = json.loads((folder / "tokenizer_config.json").read_text())
        except (OSError, ValueError):
            config = {}
        if (folder / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            self._fast: Any = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self._fast.no_padding()  # batches are padded per length bucket by the caller
            self._fast.enable_truncation(max_length, strategy="longest_first", direction="right")
            pad = _token(config.get("pad_token"))
            pad_id = self._fast.token_to_id(pad) if pad else None
            self.pad_id = int(pad_id or 0)
            self._slow: Any = None
        else:
            log.info("%s has no tokenizer.json: tokenizing with transformers (which imports torch)", folder)
            from transformers import AutoTokenizer

            self._slow = AutoTokenizer.from_pretrained(str(folder))
            self.pad_id = int(self._slow.pad_token_id or 0)

    def __call__(self, texts: list[str]) -> list[list[int]]:
        if self._slow is not None:
            return list(self._slow(texts, truncation=True, max_length=self._max_length)["input_ids"])
        if len(texts) == 1:  # a single query: encode_batch would wake tokenizers' thread pool for it
            return [self._fast.encode(texts[0]).ids]
        return [e.ids for e in self._fast.encode_batch(texts)]
