"""Image corpora (`is_multimodal`): passages are image files, queries are text, one space.

The model is an image-text model that sentence-transformers loads with an image modality (a CLIP
model folder, for one). It runs on torch: the exported runtimes carry the text tower only. A
passage's text is the image's absolute path (corpus.py); images are read here, a piece at a time,
so memory holds one piece of decoded images, never the corpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import Config
from ..errors import ConfigError, CorpusError, NotYetSupportedError
from ..security.limits import check_cancel
from .local import PIECE_BATCHES
from .runtime import Choice, choose
from .sentence_transformers import SentenceTransformerEmbedder


def image_choice(cfg: Config, device: str) -> Choice:
    st = cfg.backend_configs.sentence_transformers
    if st.runtime not in ("auto", "torch"):
        raise ConfigError(f"is_multimodal runs the image-text model on torch; runtime {st.runtime!r} exports the "
                          "text tower only: set backend_configs.sentence_transformers.runtime: torch (or auto)")
    precision = "fp32" if st.precision == "auto" else st.precision
    choice = choose("torch", precision, device, local_model=True)
    return Choice(choice.runtime, choice.precision, "is_multimodal: image-text models run on torch")


def refuse_server_backend(cfg: Config) -> None:
    """OpenAI-compatible /embeddings takes text only (Infinity's takes images: embedders/remote.py)."""
    raise NotYetSupportedError(
        f"is_multimodal: backend {cfg.backend!r} embeds text only (the OpenAI embeddings API has no images); set "
        "backend: sentence_transformers with an image-text model (a CLIP model folder), or backend: infinity "
        "serving one")


def load_image(path: str, convert: bool = True) -> Any:
    """The image at `path` (in RGB, read whole), or with `convert=False` opened lazily (its header)."""
    from PIL import Image, UnidentifiedImageError

    try:
        if not convert:
            return Image.open(path)
        with Image.open(path) as im:
            return im.convert("RGB")
    except (UnidentifiedImageError, OSError) as e:
        raise CorpusError(f"cannot read the image {path}: {e}") from None


class ImageEmbedder(SentenceTransformerEmbedder):
    """`encode_passages` takes image paths; `encode_queries` takes text, as for any model."""

    def __init__(self, cfg: Config, choice: Choice, device: str, warnings: list[str]) -> None:
        super().__init__(cfg, choice, device, warnings)
        modalities = list(getattr(self.model, "modalities", ["text"]))
        if "image" not in modalities or "text" not in modalities:
            raise ConfigError(f"is_multimodal: model {cfg.model_name_or_path or self.model_id!r} embeds "
                              f"{' and '.join(map(str, modalities))}, not images and text in one space; set "
                              "model_name_or_path to an image-text model (a CLIP model folder)")

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        step = self._batch_size * PIECE_BATCHES
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i in range(0, len(texts), step):
            check_cancel("embedding")  # a call whose client left stops between pieces
            out[i : i + step] = self._encode([load_image(p) for p in texts[i : i + step]], None, "passage")
        return out
