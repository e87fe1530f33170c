"""A project folder for a test or a bench: the checkout's paths (`ROOT`, the sample corpus, SciFact),
a parameter.yaml with relative output paths beside a copy of the corpus (`write_project`), and an
engine over it (`engine_for`). `ROOT` is the checkout this package is installed from in editable
mode (`pip install -e '.[test]'`): the data and the shipped parameter.yaml live there."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "data" / "sample_corpus.jsonl"
SCIFACT = ROOT / "data" / "scifact"


def write_project(folder: Path, corpus: Path | str = SAMPLE, **overrides: Any) -> Path:
    """A parameter.yaml in `folder` (relative output paths), the corpus copied beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus_path = Path(corpus)
    if corpus_path.is_file():
        shutil.copy(corpus_path, folder / "corpus.jsonl")
    cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
    cfg.update(
        corpus_path="corpus.jsonl",
        embedding_path="out/embedding.npy",
        docs_path="out/docs",
    )
    cfg["backend_configs"]["bm25"]["save_path"] = "out/bm25"
    cfg["index_backend_configs"]["faiss"]["index_path"] = "out/faiss"
    for key, value in overrides.items():
        cfg[key] = value
    path = folder / "parameter.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def engine_for(config_path: Path, overrides: dict[str, Any] | None = None) -> Retriever:
    """The engine over the project `config_path` names (its folder the base of relative paths)."""
    from ..config import load_config
    from ..engine.retriever import Retriever

    return Retriever(load_config(config_path, overrides), config_path.parent)
