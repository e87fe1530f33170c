"""A static embedding model (model2vec) distilled once from the configured sentence-transformers
model: each token's vector looked up and averaged, no transformer at query or index time.
Far faster and lower in quality (bench/RESULTS.md): meant for very large corpora, or the dense
side of hybrid search where BM25 carries part of the weight."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import MissingDependencyError
from .cache import cached, model_folder
from .local import LocalEmbedder, folder_prompts
from .runtime import Choice, extra

log = logging.getLogger(__name__)


def static_folder(cfg: Config) -> Path:
    st = cfg.backend_configs.sentence_transformers
    return model_folder(st.cache_dir, Path(cfg.resolved_model()), f"model2vec-{st.static_dimensions}")


def _distill(cfg: Config, out: Path) -> None:
    from model2vec.distill import distill

    dims = cfg.backend_configs.sentence_transformers.static_dimensions
    distill(model_name=cfg.resolved_model(), pca_dims=dims).save_pretrained(str(out))


class StaticEmbedder(LocalEmbedder):
    def __init__(self, cfg: Config, choice: Choice) -> None:
        super().__init__(cfg, choice)
        st = cfg.backend_configs.sentence_transformers
        try:
            from model2vec import StaticModel

            folder = cached(static_folder(cfg), lambda tmp: _distill(cfg, tmp),
                            f"a static model distilled from {self.model_id}")
            self._model: Any = StaticModel.from_pretrained(str(folder))
        except ImportError as e:
            raise MissingDependencyError(e.name or "model2vec", extra("static")) from e
        # Another model than the one it came from: its vectors live in another space.
        self.model_id = f"{self.model_id} static-{st.static_dimensions} (model2vec)"
        self._max_len = st.max_seq_length or 512
        self.dimension = int(self._model.dim)
        self._ready(folder_prompts(Path(cfg.resolved_model())))

    def _run(self, texts: list[str], prompt: str | None, kind: str) -> np.ndarray:
        if prompt:
            texts = [prompt + t for t in texts]
        return self._model.encode(texts, max_length=self._max_len, batch_size=1024, show_progress_bar=False)
