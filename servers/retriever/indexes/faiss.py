"""FAISS on local disk: exact inner product (IndexFlatIP), row i = corpus row i."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..compute import on_compute_thread
from ..errors import IndexMismatchError, MissingDependencyError
from ..filters import Filter
from ..persist import publish, read_manifest

log = logging.getLogger(__name__)


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as e:
        raise MissingDependencyError("faiss", "faiss-cpu") from e
    return faiss


def _maybe_gpu(index: Any, use_gpu: bool, warnings: list[str]) -> Any:
    if not use_gpu:
        return index
    faiss = _faiss()
    if getattr(faiss, "get_num_gpus", lambda: 0)() < 1:
        warnings.append("index_use_gpu is true but FAISS sees no GPU (faiss-cpu or no device); searching on CPU")
        log.warning(warnings[-1])
        return index
    return faiss.index_cpu_to_all_gpus(index)


class FaissIndex:
    kind = "faiss"

    def __init__(self, index: Any, manifest: dict[str, Any], use_gpu: bool = False) -> None:
        self.warnings: list[str] = []
        self._use_gpu = use_gpu
        self._cpu = index
        self._index = _maybe_gpu(index, use_gpu, self.warnings)
        self.dimension = int(index.d)
        self.manifest = manifest

    @classmethod
    def build(cls, vectors: np.ndarray, chunk: int, use_gpu: bool = False) -> FaissIndex:
        """Add `vectors` (an array or a memmap) `chunk` rows at a time."""
        faiss = _faiss()
        index = faiss.IndexFlatIP(int(vectors.shape[1]))
        for start in range(0, len(vectors), chunk):
            on_compute_thread(index.add, np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32))
        return cls(index, {}, use_gpu)

    @classmethod
    def empty(cls, dimension: int) -> FaissIndex:
        return cls(_faiss().IndexFlatIP(dimension), {})

    def with_vectors(self, vectors: np.ndarray) -> FaissIndex:
        """A copy with `vectors` appended as the next rows (this index is left as it is, so
        searches holding it are undisturbed)."""
        index = _faiss().clone_index(self._cpu)
        on_compute_thread(index.add, np.ascontiguousarray(vectors, dtype=np.float32))
        return FaissIndex(index, self.manifest, self._use_gpu)

    @classmethod
    def load(cls, folder: Path, use_gpu: bool = False) -> FaissIndex | None:
        manifest = read_manifest(folder)
        if manifest is None:
            return None
        if manifest.get("kind") != cls.kind:
            raise IndexMismatchError(f"{folder} holds a {manifest.get('kind')!r} index, not faiss")
        index = _faiss().read_index(str(folder / manifest["data"]))
        if index.ntotal != manifest["count"]:
            raise IndexMismatchError(f"{folder}: {index.ntotal} vectors but the manifest says {manifest['count']}")
        return cls(index, manifest, use_gpu)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None,
               f: Filter | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Exact top k; with `allowed` (a boolean mask over rows) only those rows are candidates,
        scanned in full by FAISS (an ID selector), so a selective filter still fills k. The
        filter `f` itself is already in `allowed`."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if allowed is None:
            scores, rows = on_compute_thread(self._index.search, queries, min(k, len(self)))
            return rows, scores
        allowed = allowed[: len(self)]
        k = min(k, int(allowed.sum()))
        if k == 0:
            return np.empty((len(queries), 0), np.int64), np.empty((len(queries), 0), np.float32)
        faiss = _faiss()
        bitmap = np.packbits(allowed, bitorder="little")
        params = faiss.SearchParameters(sel=faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap)))
        scores, rows = on_compute_thread(lambda: self._index.search(queries, k, params=params))
        return rows, scores

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        faiss = _faiss()
        full = {**manifest, "kind": self.kind, "metric": "ip", "index_type": "IndexFlatIP"}
        self.manifest = publish(folder, full, lambda p: faiss.write_index(self._cpu, str(p)))
