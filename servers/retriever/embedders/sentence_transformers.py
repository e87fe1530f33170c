"""sentence-transformers in process (the default: the packaged all-MiniLM-L6-v2 on CPU)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..compute import on_compute_thread
from ..config import MINILM_ALIASES, Config
from ..errors import ConfigError
from .base import with_instruction

log = logging.getLogger(__name__)
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
PIECE_BATCHES = 4


def pick_device(gpu_ids: str | int | None, warnings: list[str]) -> str:
    if gpu_ids is None or str(gpu_ids).strip() == "":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return f"cuda:{str(gpu_ids).split(',')[0].strip()}"
    warnings.append(f"gpu_ids={gpu_ids!r} but no CUDA device is visible; embedding on CPU")
    log.warning(warnings[-1])
    return "cpu"


def native_bf16_cpu() -> bool:
    """Whether the CPU computes bfloat16 in hardware (AMX or AVX512-BF16); elsewhere torch
    emulates it, several times slower than fp32 (bench/RESULTS.md)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def precision_kwargs(precision: str, device: str, warnings: list[str]) -> dict[str, Any]:
    if precision == "fp32":
        return {}
    import torch

    if device == "cpu" and not native_bf16_cpu():
        warnings.append("precision bf16 on a CPU without AMX or AVX512-BF16 runs emulated, slower than fp32; "
                        "set backend_configs.sentence_transformers.precision: fp32")
        log.warning(warnings[-1])
    return {"torch_dtype": torch.bfloat16}


class SentenceTransformerEmbedder:
    def __init__(self, cfg: Config) -> None:
        from sentence_transformers import SentenceTransformer

        self.warnings: list[str] = []
        st = cfg.backend_configs.sentence_transformers
        self._enc = st.sentence_transformers_encode
        self._batch_size = cfg.batch_size
        name = cfg.model_name_or_path.strip()
        self.model_id = MINILM_ID if name.lower() in MINILM_ALIASES else name
        self.device = pick_device(cfg.gpu_ids, self.warnings)
        model_kwargs = precision_kwargs(st.precision, self.device, self.warnings)
        self.model = on_compute_thread(lambda: SentenceTransformer(
            cfg.resolved_model(), device=self.device, trust_remote_code=st.trust_remote_code,
            local_files_only=Path(cfg.resolved_model()).exists(), model_kwargs=model_kwargs,
        ))
        dimension = self.model.get_embedding_dimension()
        if dimension is None:
            raise ConfigError(f"{cfg.resolved_model()}: the model does not say its embedding dimension")
        self.dimension = int(dimension)
        self._q_kwargs = self._prompt_kwargs(self._enc.q_prompt_name, self._enc.q_task)
        self._p_kwargs = self._prompt_kwargs(self._enc.psg_prompt_name, self._enc.psg_task)
        self.encode_queries(["warm-up"], "")  # the first real query pays no start-up cost

    def _prompt_kwargs(self, prompt_name: str | None, task: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if prompt_name:
            if prompt_name in (self.model.prompts or {}):
                kwargs["prompt_name"] = prompt_name
            else:
                self.warnings.append(
                    f"prompt name {prompt_name!r} is not defined by model {self.model_id} "
                    f"(it has {sorted(self.model.prompts or {})}); encoding without it"
                )
                log.warning(self.warnings[-1])
        if task:
            kwargs["task"] = task
        return kwargs

    def _encode(self, texts: Sequence[str], kwargs: dict[str, Any]) -> np.ndarray:
        out = on_compute_thread(lambda: self.model.encode(
            list(texts), batch_size=self._batch_size, show_progress_bar=False,
            normalize_embeddings=self._enc.normalize_embeddings, convert_to_numpy=True, **kwargs,
        ))
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], instruction: str) -> np.ndarray:
        if instruction:
            # An explicit instruction replaces the model's query prompt: applied once, never twice.
            texts = with_instruction(texts, instruction)
            kwargs = {k: v for k, v in self._q_kwargs.items() if k != "prompt_name"}
            return self._encode(texts, kwargs)
        return self._encode(texts, self._q_kwargs)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        # A few batches per turn on the compute thread: a query that arrives while the corpus is
        # being embedded waits for one piece, not for the whole chunk.
        step = self._batch_size * PIECE_BATCHES
        if len(texts) <= step:
            return self._encode(texts, self._p_kwargs)
        return np.concatenate([self._encode(texts[i : i + step], self._p_kwargs) for i in range(0, len(texts), step)])
