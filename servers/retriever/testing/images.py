"""Test parts for image corpora: a tiny image-text (CLIP) model built at test time and images drawn
in the test. No image-text weights ship in a PyPI package, so the model has random weights: the
tests check the plumbing (dimensions, ids, paths, persistence, filters, errors), not quality."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .projects import write_project

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 60), "blue": (40, 60, 220), "yellow": (230, 220, 40),
           "black": (10, 10, 10), "white": (245, 245, 245), "purple": (140, 40, 160), "orange": (250, 140, 20)}


def tiny_clip(folder: Path) -> Path:
    """A CLIP model (2 layers per tower, width 32, 16 dimensions) with a byte-level tokenizer,
    saved as transformers saves any CLIP model; sentence-transformers loads it by path."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPProcessor, CLIPTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = list(bytes_to_unicode().values())
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for token in chars + [c + "</w>" for c in chars]:
        vocab.setdefault(token, len(vocab))
    torch.manual_seed(0)
    layers = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = CLIPConfig(text_config={**layers, "vocab_size": len(vocab), "max_position_embeddings": 77,
                                     "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1},
                        vision_config={**layers, "image_size": 32, "patch_size": 8}, projection_dim=16)
    pixels = CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPModel(config).save_pretrained(folder)
    CLIPProcessor(image_processor=pixels, tokenizer=CLIPTokenizer(vocab=vocab, merges=[])).save_pretrained(folder)
    return folder


def draw(path: Path, colour: str, seed: int) -> Path:
    """A picture: a filled square of `colour` on noise (each seed its own size and noise)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(24, 80)), int(rng.integers(24, 80))
    pixels = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    pixels[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = COLOURS[colour]
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return path


def image_records(folder: Path, n: int = 12) -> list[dict[str, Any]]:
    """`n` pictures under `folder/img/` and their corpus records (paths relative to `folder`)."""
    names = list(COLOURS)
    out = []
    for i in range(n):
        colour = names[i % len(names)]
        draw(folder / "img" / f"{i:03d}.png", colour, seed=i)
        out.append({"id": f"img{i}", "image_path": f"img/{i:03d}.png", "colour": colour, "n": i})
    return out


def image_project(folder: Path, model: Path, records: list[dict[str, Any]] | None = None, **overrides: Any) -> Path:
    """A project whose corpus is an image set, with `is_multimodal: true` and the tiny model."""
    folder.mkdir(parents=True, exist_ok=True)
    records = image_records(folder) if records is None else records
    (folder / "images.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return write_project(folder, corpus="none", corpus_path="images.jsonl", model_name_or_path=str(model),
                         is_multimodal=True, **overrides)


def reference_vectors(model: Path, paths: list[str], queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Unit image and query vectors straight from sentence-transformers, for comparison."""
    from PIL import Image
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model), device="cpu", local_files_only=True)
    images = [Image.open(p).convert("RGB") for p in paths]
    return (st.encode(images, normalize_embeddings=True, convert_to_numpy=True),
            st.encode(queries, normalize_embeddings=True, convert_to_numpy=True))
