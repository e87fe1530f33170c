"""What every in-process runtime shares (torch, onnx, openvino, static): the model's name in
manifests, prompts and instructions, a corpus embedded a few batches per turn on the compute
thread, and unit-length float32 rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..compute import on_compute_thread
from ..config import Config
from ..errors import ConfigError
from ..security.limits import check_cancel
from .base import model_id_for, with_instruction
from .runtime import Choice

log = logging.getLogger(__name__)
PIECE_BATCHES = 4


def folder_prompts(folder: Path) -> dict[str, str]:
    """The prompts a sentence-transformers model folder defines (config_sentence_transformers.json)
    over the empty query and document prompts sentence-transformers gives every model."""
    try:
        found = json.loads((folder / "config_sentence_transformers.json").read_text()).get("prompts") or {}
    except (OSError, ValueError):
        found = {}
    return {"query": "", "document": "", **found}  # sentence-transformers' defaults


def check_length(max_seq_length: int, positions: int | None) -> int:
    """`max_seq_length`, or an error where the model has fewer positions than that."""
    if positions is not None and max_seq_length > positions:
        raise ConfigError(f"max_seq_length {max_seq_length} is more than the model has positions for ({positions})")
    return int(max_seq_length)


class LocalEmbedder:
    """Subclasses set `dimension` and implement `_run(texts, prompt, kind)`; then call `_ready()`."""

    dimension: int

    def __init__(self, cfg: Config, choice: Choice) -> None:
        self.warnings: list[str] = []
        self.choice = choice
        self.runtime = choice.label
        self.runtime_reason = choice.reason
        self._enc = cfg.backend_configs.sentence_transformers.sentence_transformers_encode
        if choice.runtime != "torch" and (self._enc.q_task or self._enc.psg_task):
            raise ConfigError(f"q_task / psg_task need runtime: torch (runtime {choice.runtime!r} has no task adapters)")
        self._batch_size = cfg.batch_size
        self.model_id = model_id_for(cfg.model_name_or_path)
        self._q_prompt: str | None = None
        self._p_prompt: str | None = None

    def _ready(self, prompts: dict[str, str]) -> None:
        self._q_prompt = self._prompt(prompts, self._enc.q_prompt_name)
        self._p_prompt = self._prompt(prompts, self._enc.psg_prompt_name)
        log.info("embedding with %s on %s (%s)", self.model_id, self.runtime, self.runtime_reason)
        self.encode_queries(["warm-up"], "")  # the first real query pays no start-up cost

    def _prompt(self, prompts: dict[str, str], name: str | None) -> str | None:
        if not name:
            return None
        if name in prompts:
            return prompts[name]
        self.warnings.append(f"prompt name {name!r} is not defined by model {self.model_id} "
                             f"(it has {sorted(prompts)}); encoding without it")
        log.warning(self.warnings[-1])
        return None

    def _run(self, texts: list[str], prompt: str | None, kind: str) -> np.ndarray:
        raise NotImplementedError

    def _encode(self, texts: Sequence[str], prompt: str | None, kind: str) -> np.ndarray:
        out = np.asarray(on_compute_thread(lambda: self._run(list(texts), prompt, kind)), dtype=np.float32)
        if self._enc.normalize_embeddings:  # in float32 whatever the runtime computed in
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(out)

    def encode_queries(self, texts: Sequence[str], instruction: str) -> np.ndarray:
        if instruction:
            # An explicit instruction replaces the model's query prompt: applied once, never twice.
            return self._encode(with_instruction(texts, instruction), None, "query")
        return self._encode(texts, self._q_prompt, "query")

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        # A few batches per turn on the compute thread: a query that arrives while the corpus is
        # being embedded waits for one piece, not for the whole chunk. Shortest first across
        # all of `texts`, so each batch pads to similar lengths (as one library call would).
        step = self._batch_size * PIECE_BATCHES
        if len(texts) <= step:
            return self._encode(texts, self._p_prompt, "passage")
        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i in range(0, len(texts), step):
            check_cancel("embedding")  # a call whose client left stops between pieces
            rows = order[i : i + step]
            out[rows] = self._encode([texts[j] for j in rows], self._p_prompt, "passage")
        return out
