"""sentence-transformers in process on torch (fp32, or bf16 where the CPU computes it natively)."""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..compute import on_compute_thread
from ..config import Config
from ..errors import ConfigError
from .local import LocalEmbedder, check_length
from .runtime import Choice, bf16_flag, cpu_flags

log = logging.getLogger(__name__)


def pick_device(gpu_ids: str | int | None, warnings: list[str]) -> str:
    if gpu_ids is None or str(gpu_ids).strip() == "":
        return "cpu"
    try:
        import torch
    except ImportError:  # a lean install: exported runtimes run on the CPU
        warnings.append(f"gpu_ids={gpu_ids!r} but torch is not installed; embedding on CPU")
        log.warning(warnings[-1])
        return "cpu"
    if torch.cuda.is_available():
        return f"cuda:{str(gpu_ids).split(',')[0].strip()}"
    warnings.append(f"gpu_ids={gpu_ids!r} but no CUDA device is visible; embedding on CPU")
    log.warning(warnings[-1])
    return "cpu"


def native_bf16_cpu() -> bool:
    """Whether the CPU computes bfloat16 in hardware (AMX or AVX512-BF16); elsewhere torch
    emulates it, several times slower than fp32 (bench/RESULTS.md)."""
    return bf16_flag(cpu_flags()) is not None


def precision_kwargs(precision: str, device: str, warnings: list[str]) -> dict[str, Any]:
    """`dtype_kwargs(precision)`, with a warning where bf16 runs emulated on this CPU."""
    if precision != "fp32" and device == "cpu" and not native_bf16_cpu():
        warnings.append("precision bf16 on a CPU without AMX or AVX512-BF16 runs emulated, slower than fp32; "
                        "set backend_configs.sentence_transformers.precision: fp32")
        log.warning(warnings[-1])
    return dtype_kwargs(precision)


def dtype_kwargs(precision: str = "fp32") -> dict[str, Any]:
    """The model_kwargs that load the weights in `precision` (fp32 | bf16), always named: left out,
    sentence-transformers loads a checkpoint in the dtype it was saved in, so an fp16 checkpoint
    would run fp16 while the runtime says fp32."""
    import torch

    return {_dtype_key(): {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]}


@cache
def _dtype_key() -> str:
    """transformers' name for the load dtype: `dtype` from 4.56 on (`torch_dtype` is deprecated
    there, and logs so), `torch_dtype` before."""
    from importlib.metadata import version

    from packaging.version import Version

    return "dtype" if Version(version("transformers")).release[:2] >= (4, 56) else "torch_dtype"


def load_model(cfg: Config, device: str = "cpu", model_kwargs: dict[str, Any] | None = None) -> Any:
    """The SentenceTransformer of the YAML's model (offline when it is a local folder), in fp32
    unless `model_kwargs` names another dtype."""
    from sentence_transformers import SentenceTransformer

    if model_kwargs is None:
        model_kwargs = dtype_kwargs()

    st = cfg.backend_configs.sentence_transformers
    model = SentenceTransformer(cfg.resolved_model(), device=device, trust_remote_code=st.trust_remote_code,
                                local_files_only=Path(cfg.resolved_model()).exists(), model_kwargs=model_kwargs)
    if st.max_seq_length is not None:
        model.max_seq_length = check_length(st.max_seq_length, model_positions(model))
    return model


def model_positions(model: Any) -> int | None:
    """How many positions the model's transformer has (None where it does not say)."""
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    return getattr(config, "max_position_embeddings", None)


class SentenceTransformerEmbedder(LocalEmbedder):
    def __init__(self, cfg: Config, choice: Choice, device: str, warnings: list[str]) -> None:
        super().__init__(cfg, choice)
        self.warnings += warnings
        self.device = device
        model_kwargs = precision_kwargs(choice.precision, device, self.warnings)
        self.model = on_compute_thread(lambda: load_model(cfg, device, model_kwargs))
        dimension = self.model.get_embedding_dimension()
        if dimension is None:
            raise ConfigError(f"{cfg.resolved_model()}: the model does not say its embedding dimension")
        self.dimension = int(dimension)
        self._tasks = {"query": self._enc.q_task, "passage": self._enc.psg_task}
        self._ready(dict(self.model.prompts or {}))

    def _run(self, texts: list[str], prompt: str | None, kind: str) -> np.ndarray:
        kwargs: dict[str, Any] = {"prompt": prompt} if prompt else {}
        if task := self._tasks[kind]:
            kwargs["task"] = task
        return self.model.encode(texts, batch_size=self._batch_size, show_progress_bar=False,
                                 normalize_embeddings=False, convert_to_numpy=True, **kwargs)
