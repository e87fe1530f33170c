"""The files of a source: relative paths (POSIX), sizes and modification times, in a stable
order; include / exclude patterns; symbolic links that leave the folder are not followed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from ..config.sources import SourceConfig
from ..errors import ConfigError, LimitError


@dataclass(frozen=True)
class File:
    path: Path  # on this machine (never shown to a client)
    rel: str  # relative to the source's folder, '/'-separated
    size: int
    mtime_ns: int


def doc_id(source: SourceConfig, rel: str) -> str:
    return f"{source.name}/{rel}" if source.name else rel


def matches(rel: str, patterns: list[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatchcase(rel, p) or ("/" not in p and any(fnmatchcase(part, p) for part in parts))
               for p in patterns)


def walk(source: SourceConfig) -> Iterator[File]:
    root = source.path
    if not root.is_dir():
        raise ConfigError(f"source {source.name or root.name!r}: {root} is not a folder")
    real_root = root.resolve()
    found = 0
    for folder, dirs, files in os.walk(root, followlinks=source.follow_symlinks):
        base = Path(folder)
        rel_folder = base.relative_to(root).as_posix()
        dirs[:] = sorted(d for d in dirs if not matches(_join(rel_folder, d), source.exclude))
        for name in sorted(files):
            rel = _join(rel_folder, name)
            if matches(rel, source.exclude) or not matches(rel, source.include):
                continue
            path = base / name
            if path.is_symlink() and not source.follow_symlinks and not path.resolve().is_relative_to(real_root):
                continue  # a link out of the folder
            try:
                st = path.stat()
            except OSError:
                continue  # gone since the listing (or a dangling link): not there
            if not path.is_file():
                continue
            found += 1
            if found > source.max_files:
                raise LimitError(f"source {source.name or root.name!r}: more than max_files ({source.max_files}) "
                                 "files; narrow include / exclude or raise sources[].max_files")
            yield File(path, rel, st.st_size, st.st_mtime_ns)


def _join(folder: str, name: str) -> str:
    return name if folder in ("", ".") else f"{folder}/{name}"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()
