"""Embedding backends; `build_embedder(cfg)` picks one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..config import Config
from ..errors import MissingDependencyError, NotYetSupportedError
from .base import Embedder
from .runtime import Choice, choose


def build_embedder(cfg: Config) -> Embedder:
    if cfg.is_multimodal and cfg.backend == "openai":
        from .images import refuse_server_backend

        refuse_server_backend(cfg)
    match cfg.backend:
        case "sentence_transformers":
            return _local(cfg)
        case "openai":
            from .remote import ServerEmbedder, openai_settings

            return ServerEmbedder(openai_settings(cfg), cfg)
        case "infinity":
            from .remote import ImageServerEmbedder, ServerEmbedder, infinity_settings

            kind = ImageServerEmbedder if cfg.is_multimodal else ServerEmbedder
            return kind(infinity_settings(cfg), cfg)
        case "bm25":
            raise NotYetSupportedError(
                "backend 'bm25' has no dense embedder; use bm25_index / bm25_search, "
                "or set backend: sentence_transformers for dense search"
            )
        case other:
            raise NotYetSupportedError(
                f"backend {other!r} is accepted in parameter.yaml but not active in this release; "
                "use backend: sentence_transformers"
            )


def _local(cfg: Config) -> Embedder:
    """The in-process model on the runtime `choose` picks (runtime.py says why each)."""
    from .runtime import extra, missing_modules
    from .sentence_transformers import SentenceTransformerEmbedder, pick_device

    warnings: list[str] = []
    device = pick_device(cfg.gpu_ids, warnings)
    if cfg.is_multimodal:
        from .images import ImageEmbedder, image_choice

        return ImageEmbedder(cfg, image_choice(cfg, device), device, warnings)
    choice = local_choice(cfg, device)
    match choice.runtime:
        case "onnx" | "openvino":
            from .exported import ExportedEmbedder

            embedder: Embedder = ExportedEmbedder(cfg, choice)
        case "static":
            from .static import StaticEmbedder

            embedder = StaticEmbedder(cfg, choice)
        case _:
            if absent := missing_modules("torch"):  # a lean install (onnx, openvino): the torch side is an extra
                raise MissingDependencyError(absent[0], extra("torch"))
            embedder = SentenceTransformerEmbedder(cfg, choice, device, [])
    embedder.warnings[:0] = warnings  # a GPU asked for and not found: whichever runtime runs
    return embedder


def local_choice(cfg: Config, device: str) -> Choice:
    """The runtime `choose` picks for the in-process model; torch whenever q_task / psg_task are
    set, whatever `auto` would pick: only torch runs a model's task adapters."""
    st = cfg.backend_configs.sentence_transformers
    enc = st.sentence_transformers_encode
    if st.runtime == "auto" and (enc.q_task or enc.psg_task):
        return replace(choose("torch", st.precision, device, True), reason="q_task / psg_task set: task adapters run on torch")
    return choose(st.runtime, st.precision, device, Path(cfg.resolved_model()).is_dir())


__all__ = ["Embedder", "build_embedder"]
