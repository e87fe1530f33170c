"""Collections beside the one retriever_init opened: the configured store's list, and sessions of
others (a fan-out search, a search's `collection_name`), opened with the current settings and
model and kept until the next retriever_init."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import IndexMissingError
from ..indexes import backend_for
from ..session import Session, open_session
from ..store.catalog import collection_names, describe, recorded_corpus


def _held(cfg: Config) -> list[dict[str, Any]] | None:
    """The collections a backend keeps itself (Milvus), described; None where they are folders here."""
    return backend_for(cfg)[0].describe(cfg)


def listed(cfg: Config) -> list[dict[str, Any]]:
    """Every collection of the configured store: its documents, model, dimension, indexes."""
    held = _held(cfg)
    if held is not None:
        return held
    return [describe(cfg.model_copy(update={"collection_name": name})) for name in collection_names(cfg)]


def _exists(cfg: Config, name: str) -> bool:
    held = _held(cfg)
    return name in (collection_names(cfg) if held is None else [c["name"] for c in held])


class Others:
    """The sessions of other collections, opened on first use (one at a time)."""

    def __init__(self) -> None:
        self._open: dict[str, Session] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        self._open = {}

    def session(self, base: Config, base_dir: Path | None, name: str, current: Session) -> Session:
        """Collection `name`'s session, with `current`'s model (opened again if it changed)."""
        with self._lock:
            other = self._open.get(name)
            if other is None or other.embedder is not current.embedder:
                cfg = recorded_corpus(base.with_overrides({"collection_name": name}, base_dir))
                if not _exists(cfg, name):
                    raise IndexMissingError(f"no collection named {name!r}; retriever_list_collections lists them")
                other = self._open[name] = open_session(cfg, current.embedder)
            return other
