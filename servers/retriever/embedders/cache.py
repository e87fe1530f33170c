"""Where exported and distilled models live: one folder per (model files, variant), made once
under a lock, written to a temporary name and renamed, so a crash or a second process never
leaves half a model behind."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
SAMPLE = 1 << 16  # bytes read from each end of a large file for its fingerprint


def cache_root(configured: Path | None) -> Path:
    """The YAML's cache_dir, then $RETRIEVER_CACHE_DIR, then $XDG_CACHE_HOME or ~/.cache."""
    if configured is not None:
        return configured
    if env := os.environ.get("RETRIEVER_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mcp-retriever"


def model_fingerprint(folder: Path) -> str:
    """12 hex digits over the model folder's files: names, sizes, small files whole and both
    ends of large ones (weights change in size or bytes when a model is replaced)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        h.update(f"{path.relative_to(folder)}\0{size}\0".encode())
        with path.open("rb") as f:
            if size <= 2 * SAMPLE:
                h.update(f.read())
            else:
                h.update(f.read(SAMPLE))
                f.seek(-SAMPLE, os.SEEK_END)
                h.update(f.read())
    return h.hexdigest()[:12]


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[-60:] or "model"


def model_folder(configured: Path | None, model: Path, variant: str) -> Path:
    """The cache folder of `variant` made from the model folder `model` (keyed by its files)."""
    return cache_root(configured) / f"{slug(model.name)}-{model_fingerprint(model)}-{variant}"


def cached(folder: Path, make: Callable[[Path], None], what: str) -> Path:
    """`folder`, made by `make(tmp)` if missing: under a lock, into a temporary folder renamed at
    the end. Another process making the same folder waits and then reuses it."""
    if (folder / ".complete").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / ".complete").exists():
            return folder
        tmp = folder.parent / f".{folder.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("making %s once into %s (reused afterwards)", what, folder)
        try:
            tmp.mkdir()
            make(tmp)
            (tmp / ".complete").write_text("")
            shutil.rmtree(folder, ignore_errors=True)  # an incomplete one left by a crash
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
