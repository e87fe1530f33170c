"""Crash-safe persistence: a folder holds `manifest.json` and the native data it names.

A new version is written under a fresh name, then the manifest is replaced atomically
(temporary file, fsync, rename), then the old data is removed. A crash at any point leaves a
manifest that names complete data: the old version or the new one, never half of either.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import IndexMismatchError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when there is none (nothing was ever published)."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise IndexMismatchError(f"{path}: unreadable manifest ({e}); rebuild with overwrite=true") from None
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexMismatchError(
            f"{path}: format version {manifest.get('format_version')!r}, this release reads "
            f"{FORMAT_VERSION}; rebuild with overwrite=true"
        )
    return manifest


def publish(folder: Path, manifest: dict[str, Any], write: Callable[[Path], None]) -> dict[str, Any]:
    """Write new data with `write(path)` under a fresh name, then switch the manifest to it."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"data-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    write(folder / name)
    _fsync_tree(folder / name)
    full = {"format_version": FORMAT_VERSION, **manifest, "data": name, "created": time.time()}
    atomic_write_text(folder / MANIFEST, json.dumps(full, indent=2))
    _sweep(folder, keep={MANIFEST, name})
    return full


def _fsync_tree(path: Path) -> None:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        with file.open("rb") as f:
            os.fsync(f.fileno())


def _sweep(folder: Path, keep: set[str]) -> None:
    """Remove old versions and leftovers of crashed writes."""
    for entry in folder.iterdir():
        if entry.name in keep:
            continue
        if entry.name.startswith(("data-", ".")):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def check_manifest(manifest: dict[str, Any], expected: dict[str, Any], where: Path, fix: str) -> None:
    """Refuse a manifest whose recorded values differ from what this session expects."""
    wrong = [f"{k}: saved {manifest.get(k)!r}, now {v!r}" for k, v in expected.items() if manifest.get(k) != v]
    if wrong:
        raise IndexMismatchError(f"{where} does not match this session ({'; '.join(wrong)}); {fix}")
