"""The embedding matrix on disk: `<name>.npy` written in chunks, with a `<name>.npy.json` sidecar.

The matrix is written through `numpy.lib.format.open_memmap` a chunk at a time, so memory stays
at one chunk; passages go shortest first over the whole corpus to cut padding. Crash safety:
the new matrix goes to `.<name>.partial`; the old sidecar is removed before the finished matrix is
renamed into place and the new sidecar written last. A matrix without its sidecar is refused,
so a crash never leaves a matrix that loads as the wrong one. The sidecar also says the matrix is
this program's: a tool call never replaces a `.npy` without one (guard.check_replace).

Resuming: after each chunk the partial matrix is flushed to disk, then `.<name>.partial.json`
records how many chunks are done (with the manifest and chunk size they were made under). A write
killed at any point (SIGKILL included) continues from the last finished chunk when it is started
again for the same corpus, model, runtime and chunk size; anything else starts afresh.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.format import open_memmap

from ..embedders import Embedder
from ..errors import AlreadyExistsError, ConfigError, IndexMismatchError
from ..memory import bulk_allocations
from ..security.guard import check_replace
from ..security.limits import caller_progress
from .corpus import CorpusFile
from .persist import FORMAT_VERSION, atomic_write_text, check_manifest, record_of, remove_temporaries, written_here

log = logging.getLogger(__name__)
STEP = 256  # documents encoded between two moves of the progress bar (a chunk is what a resume keeps)


def sidecar(path: Path) -> Path:
    return record_of(path)


def _in_progress(path: Path) -> tuple[Path, Path]:
    """The partial matrix of a write of `path` and its resume log."""
    return path.with_name(f".{path.name}.partial"), path.with_name(f".{path.name}.partial.json")


def drop_finished_log(path: Path) -> None:
    """Call once `path` has loaded with its manifest: a write killed after publishing the matrix and
    its manifest, before removing its resume log, left the log with nothing to resume; it goes."""
    partial, log_file = _in_progress(path)
    if not partial.exists():
        log_file.unlink(missing_ok=True)


def write_embeddings(
    path: Path, docs: CorpusFile, embedder: Embedder, chunk: int, overwrite: bool,
    manifest: dict[str, Any], progress: bool = True,
) -> dict[str, Any]:
    if path.suffix != ".npy":
        raise ConfigError(f"embedding_path must end with .npy, got {path}")
    if path.exists() and not overwrite:
        raise AlreadyExistsError(f"{path} exists; pass overwrite=true to replace it")
    partial, log_file = _in_progress(path)
    # ours: its manifest says so, or a write of ours was cut between the rename and the manifest
    check_replace((path, sidecar(path)), written_here(path) or log_file.is_file(), "embedding_path")
    from tqdm import tqdm

    path.parent.mkdir(parents=True, exist_ok=True)
    for leftover in (path, sidecar(path), log_file):  # writes killed before their rename (SIGKILL runs no `finally`)
        remove_temporaries(leftover)
    n = len(docs)
    plan = {**manifest, "count": n, "dimension": embedder.dimension, "chunk": chunk}
    done = _finished_chunks(partial, log_file, plan)
    if done:
        log.info("%s: resuming at chunk %d of %d (the earlier write was interrupted)", path, done, -(-n // chunk))
        out = open_memmap(partial, mode="r+")
    else:
        log_file.unlink(missing_ok=True)
        out = open_memmap(partial, mode="w+", dtype=np.float32, shape=(n, embedder.dimension))
    # Shortest first across the whole corpus, so each batch pads to similar lengths; each
    # chunk's rows are written back to their own places.
    order = np.argsort(docs.sizes(), kind="stable")
    report = caller_progress()  # an MCP client that asked for progress (retriever_embed)
    with bulk_allocations(), tqdm(total=n, initial=min(done * chunk, n), desc="embed", unit="doc", file=sys.stderr,
                                  disable=not progress) as bar:
        for i, start in enumerate(range(0, n, chunk)):
            if i < done:
                continue
            rows = order[start : start + chunk]
            for first in range(0, len(rows), STEP):  # the bar moves every STEP documents, not every chunk
                part = rows[first : first + STEP]
                out[part] = embedder.encode_passages(list(docs.texts(part.tolist())))
                bar.update(len(part))
                if report is not None:
                    report(bar.n, n, "embed")
            out.flush()  # the rows on disk before the log says they are
            docs.release()  # the corpus pages read for this chunk need not stay resident
            atomic_write_text(log_file, json.dumps({**plan, "done": i + 1}))
    del out
    with partial.open("rb") as f:
        os.fsync(f.fileno())
    sidecar(path).unlink(missing_ok=True)
    os.replace(partial, path)
    full = {"format_version": FORMAT_VERSION, **manifest}
    atomic_write_text(sidecar(path), json.dumps(full, indent=2))
    log_file.unlink(missing_ok=True)  # last: until the manifest is written it says the matrix is ours
    return full


def _finished_chunks(partial: Path, log_file: Path, plan: dict[str, Any]) -> int:
    """Chunks an interrupted write of the same plan finished (0: start afresh)."""
    try:
        record = json.loads(log_file.read_text(encoding="utf-8"))
        shape = np.load(partial, mmap_mode="r").shape
    except (OSError, ValueError):
        return 0
    if {k: record.get(k) for k in plan} != plan or shape != (plan["count"], plan["dimension"]):
        return 0
    return int(record.get("done", 0))


def open_embeddings(path: Path, expected: dict[str, Any]) -> np.ndarray:
    """The matrix as a read-only memmap, after checking its sidecar against `expected`."""
    if not path.is_file():
        raise IndexMismatchError(f"embedding file not found: {path}; call retriever_embed first")
    try:
        manifest = json.loads(sidecar(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise IndexMismatchError(
            f"{path} has no readable manifest {sidecar(path).name} (an interrupted write or a file from "
            "elsewhere); call retriever_embed(overwrite=true)"
        ) from None
    check_manifest(manifest, expected, path, "call retriever_embed(overwrite=true)")
    matrix = np.load(path, mmap_mode="r")
    if matrix.shape != (expected["count"], expected["dimension"]):
        raise IndexMismatchError(f"{path}: shape {matrix.shape}, expected ({expected['count']}, {expected['dimension']})")
    return matrix
