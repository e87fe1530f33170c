"""The collections on disk: the default one and the named ones under `collections_path`, what
each records (its corpus file), and what their manifests say (retriever_list_collections)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import COLLECTION_NAME, Config
from .persist import atomic_write_text, read_manifest


def describe(cfg: Config) -> dict[str, Any]:
    """A collection as its manifests record it: documents, model, dimension, indexes present."""
    paths = cfg.paths()
    dense, bm25, changes = (read_manifest(p) for p in (paths.faiss, paths.bm25, paths.docs))
    base = next((m["count"] for m in (dense, bm25) if m), None)
    out: dict[str, Any] = {"name": cfg.collection_name, "index_backend": "faiss",
                           "model": (dense or changes or {}).get("model"), "dimension": (dense or changes or {}).get("dimension"),
                           "dense_index": dense is not None, "bm25_index": bm25 is not None}
    if changes:
        out["documents"] = (base or 0) + changes["added"] - changes["deleted"]
    else:
        out["documents"] = base
    return out


SETTINGS = "collection.json"


def remember_corpus(cfg: Config) -> None:
    """A named collection records its corpus file on its first write, so opening it by name
    later (retriever_init, fan-out) finds the same corpus."""
    if cfg.collection_name:
        path = cfg.collections_path / cfg.collection_name / SETTINGS
        if not path.is_file():
            corpus = str(cfg.corpus_path) if cfg.corpus_path is not None else None
            atomic_write_text(path, json.dumps({"corpus_path": corpus}))


def recorded_corpus(cfg: Config) -> Config:
    """`cfg` with the corpus file its named collection recorded (unchanged if none)."""
    path = cfg.collections_path / cfg.collection_name / SETTINGS
    if not cfg.collection_name or not path.is_file():
        return cfg
    corpus = json.loads(path.read_text(encoding="utf-8"))["corpus_path"]
    return cfg.model_copy(update={"corpus_path": Path(corpus) if corpus else None})


def collection_names(cfg: Config) -> list[str]:
    """The default collection ("") and every named one under collections_path."""
    root = cfg.collections_path
    named = sorted(p.name for p in root.iterdir() if p.is_dir() and COLLECTION_NAME.fullmatch(p.name)) if root.is_dir() else []
    return ["", *named]
