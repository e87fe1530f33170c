"""Crash-safe persistence: a folder holds `manifest.json` and the native data it names.

A new version is written under a fresh name, then the manifest is replaced atomically
(temporary file, fsync, rename), then the old data is removed. A crash at any point leaves a
manifest that names complete data: the old version or the new one, never half of either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ForbiddenError, IndexMismatchError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# The only names this module writes: data versions and atomic_write_text's temporaries. Nothing
# else in a folder is ever removed.
DATA_NAME = re.compile(r"data-\d{8}T\d{6}-[0-9a-f]{8}")
TMP_NAME = re.compile(r"\.[^/]+\.[0-9a-f]{8}\.tmp")


def temp_name(path: Path) -> Path:
    """The temporary sibling a write of `path` goes to before it is renamed into place."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")


def remove_temporaries(path: Path) -> None:
    """Leftovers of writes of `path` that a crash interrupted (only our own temporary names)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.tmp")
    if path.parent.is_dir():
        for entry in path.parent.iterdir():
            if pattern.fullmatch(entry.name) and entry.is_file():
                entry.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
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


def record_of(path: Path) -> Path:
    """The JSON record this program writes beside a file it writes (`<name>.json`): an embedding
    file's manifest, an image corpus's record."""
    return path.with_name(path.name + ".json")


def written_here(path: Path) -> bool:
    """Whether this program wrote the file `path`: its record beside it says so."""
    return _is_record(record_of(path))


FOLDER_RECORD = ".written.json"  # in a folder this program fills with files of its own (rendered pages)


def mark_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not _is_record(folder / FOLDER_RECORD):
        atomic_write_text(folder / FOLDER_RECORD, json.dumps({"format_version": FORMAT_VERSION}))


def folder_written_here(folder: Path) -> bool:
    """Whether this program filled `folder` (mark_folder)."""
    return _is_record(folder / FOLDER_RECORD)


def _is_record(path: Path) -> bool:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and "format_version" in record


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
    """Write new data with `write(path)` under a fresh name, then switch the manifest to it,
    then remove the version the old manifest named and leftovers of crashed writes. A folder
    that holds anything else and no manifest of ours is refused: it is not ours to write in."""
    _check_owned(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"data-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    write(folder / name)
    _fsync_tree(folder / name)
    full = {"format_version": FORMAT_VERSION, **manifest, "data": name, "created": time.time()}
    atomic_write_text(folder / MANIFEST, json.dumps(full, indent=2))
    _sweep(folder, keep=name)
    return full


def _check_owned(folder: Path) -> None:
    """Raise unless `folder` is new, empty, ours (our manifest) or holds only our leftovers."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ForbiddenError(f"{folder} is a file, not an index folder; choose another path")
    path = folder / MANIFEST
    if path.is_file():
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
        if isinstance(manifest, dict) and "format_version" in manifest and "data" in manifest:
            return
        raise ForbiddenError(f"{path} was not written by this program; refusing to write an index into {folder} "
                             "(choose an empty or new folder)")
    foreign = [e.name for e in folder.iterdir() if not _ours(e.name)]
    if foreign:
        raise ForbiddenError(f"{folder} is not empty ({', '.join(sorted(foreign)[:3])}...) and holds no index "
                             "of this program; refusing to write into it (choose an empty or new folder)")


def _ours(name: str) -> bool:
    return bool(DATA_NAME.fullmatch(name) or TMP_NAME.fullmatch(name))


def _fsync_tree(path: Path) -> None:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        with file.open("rb") as f:
            os.fsync(f.fileno())


def _sweep(folder: Path, keep: str) -> None:
    """Remove old versions and leftovers of crashed writes: only names this module writes."""
    for entry in folder.iterdir():
        if entry.name == keep or not _ours(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def check_manifest(manifest: dict[str, Any], expected: dict[str, Any], where: Path | str, fix: str) -> None:
    """Refuse a manifest whose recorded values differ from what this session expects."""
    wrong = [f"{k}: saved {manifest.get(k)!r}, now {v!r}" for k, v in expected.items() if manifest.get(k) != v]
    if wrong:
        raise IndexMismatchError(f"{where} does not match this session ({'; '.join(wrong)}); {fix}")
