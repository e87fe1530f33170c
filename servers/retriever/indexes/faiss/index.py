"""FAISS on local disk: row i = corpus row i; exact inner product (`Flat`) by default, or any
`index_factory` string (HNSW, IVF, PQ: the ANN choices) with inner product.

Adding documents appends to the same FAISS index (no copy), and a snapshot taken before the add
sees only its own first `n` rows (an ID range or bitmap limits the candidates exactly). FAISS
calls run on the one compute thread, but a worker may run its own work after waiting behind a
long call there (compute.py), so the index has a lock of its own, shared by its snapshots:
searches (and a save) share it, an append holds it alone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ...compute import SharedLock, on_compute_thread
from ...errors import ConfigError, IndexMismatchError, InvalidInputError, MissingDependencyError
from ...filters import Filter
from ...store.persist import publish, read_manifest
from ..base import ANN_PARAMETERS, Change

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


def new_index(dimension: int, factory: str = "Flat") -> Any:
    """An empty inner-product index from an `index_factory` string ("Flat": exact)."""
    faiss = _faiss()
    try:
        return faiss.index_factory(dimension, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise ConfigError(f"index_backend_configs.faiss.index_factory: {factory!r} is not a FAISS index_factory "
                          f"string ({str(e).splitlines()[-1][:200]}); e.g. Flat, HNSW32, IVF1024,Flat") from None


def training_rows(index: Any, n: int) -> np.ndarray:
    """Rows to train an ANN index on: all of them up to 100,000, else a fixed-seed random sample of
    100,000 or 50 per IVF list (FAISS asks for 39 or more), whichever is more, in row order."""
    ivf = _faiss().try_extract_index_ivf(index)
    want = max(100_000, 50 * ivf.nlist if ivf is not None else 0)
    if n <= want:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, size=want, replace=False))


def tune(index: Any, tuning: dict[str, int]) -> dict[str, int]:
    """Set the YAML's search-time parameters (nprobe, efSearch) the index has (FAISS's
    ParameterSpace, which also reaches through wrappers); one it lacks is an error."""
    space = _faiss().ParameterSpace()
    for name, value in tuning.items():
        try:
            space.set_index_parameter(index, name, value)
        except RuntimeError:
            raise ConfigError(f"index_backend_configs.faiss.{ANN_PARAMETERS.get(name, name)}: the index "
                              f"({type(index).__name__}) has no {name}; nprobe is for IVF indexes, ef_search for "
                              "HNSW") from None
    return tuning


def check_ann(index: Any, ann: dict[str, int]) -> dict[str, int]:
    """A call's nprobe / efSearch, refused where the index has no search parameters of that kind
    (search_parameters: SearchParametersIVF / SearchParametersHNSW)."""
    faiss = _faiss()
    has = {"nprobe": faiss.try_extract_index_ivf(index) is not None, "efSearch": isinstance(index, faiss.IndexHNSW)}
    if (name := next((n for n in ann if not has[n]), None)) is not None:
        raise InvalidInputError(f"{ANN_PARAMETERS[name]}: this collection's FAISS index ({type(index).__name__}) has "
                                f"no {name}; nprobe is for IVF indexes, ef_search for HNSW (index_factory in "
                                "parameter.yaml)")
    return ann


def search_parameters(index: Any, selector: Any, tuning: dict[str, int]) -> Any:
    """FAISS's search parameters of the index's own kind (IVF and HNSW refuse the generic ones),
    with the selector and the tuned nprobe / efSearch."""
    faiss = _faiss()
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        return faiss.SearchParametersIVF(sel=selector, nprobe=tuning.get("nprobe", ivf.nprobe))
    if isinstance(index, faiss.IndexHNSW):
        return faiss.SearchParametersHNSW(sel=selector, efSearch=tuning.get("efSearch", index.hnsw.efSearch))
    return faiss.SearchParameters(sel=selector)


class FaissIndex:
    kind = "faiss"

    def __init__(self, index: Any, manifest: dict[str, Any], use_gpu: bool = False, n: int | None = None,
                 device: Any = None, tuning: dict[str, int] | None = None, lock: SharedLock | None = None) -> None:
        self.warnings: list[str] = []
        self._lock = lock or SharedLock()  # the FAISS index's: every snapshot of it holds the same
        self._use_gpu = use_gpu
        self.tuning = tuning or {}  # set on the index by build / load (tune); kept for filtered searches
        self._cpu = index
        self._index = device if device is not None else _maybe_gpu(index, use_gpu, self.warnings)
        self._n = int(index.ntotal) if n is None else n  # the rows this snapshot sees
        self.dimension = int(index.d)
        self.manifest = manifest

    @classmethod
    def build(cls, vectors: np.ndarray, chunk: int, use_gpu: bool = False, factory: str = "Flat",
              tuning: dict[str, int] | None = None) -> FaissIndex:
        """Add `vectors` (an array or a memmap) `chunk` rows at a time; an ANN index is trained
        first on a sample (training_rows)."""
        index = new_index(int(vectors.shape[1]), factory)
        if not index.is_trained:
            sample = np.ascontiguousarray(vectors[training_rows(index, len(vectors))], dtype=np.float32)
            on_compute_thread(index.train, sample)
        for start in range(0, len(vectors), chunk):
            on_compute_thread(index.add, np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32))
        return cls(index, {}, use_gpu, tuning=tune(index, tuning or {}))

    @classmethod
    def empty(cls, dimension: int) -> FaissIndex:
        return cls(new_index(dimension), {})

    def apply(self, change: Change) -> FaissIndex:
        """Added documents' vectors appended as the next rows; deleted rows stay (the collection
        masks them) until the next build."""
        return self.with_vectors(change.vectors) if change.added and change.vectors is not None else self

    def with_vectors(self, vectors: np.ndarray) -> FaissIndex:
        """This index with `vectors` appended as the next rows, without a copy: the new snapshot
        sees them, this one (and searches holding it) still sees its own `n` rows."""
        if self._n != self._cpu.ntotal:
            raise IndexMismatchError("vectors can be appended only to the newest snapshot of an index")
        batch = np.ascontiguousarray(vectors, dtype=np.float32)

        def append() -> None:
            with self._lock.writing():
                self._cpu.add(batch)
                if self._index is not self._cpu:
                    self._index.add(batch)

        on_compute_thread(append)
        return FaissIndex(self._cpu, self.manifest, self._use_gpu, self._n + len(batch), self._index, self.tuning,
                          self._lock)

    @classmethod
    def load(cls, folder: Path, use_gpu: bool = False, tuning: dict[str, int] | None = None) -> FaissIndex | None:
        manifest = read_manifest(folder)
        if manifest is None:
            return None
        if manifest.get("kind") != cls.kind:
            raise IndexMismatchError(f"{folder} holds a {manifest.get('kind')!r} index, not faiss")
        index = _faiss().read_index(str(folder / manifest["data"]))
        if index.ntotal != manifest["count"]:
            raise IndexMismatchError(f"{folder}: {index.ntotal} vectors but the manifest says {manifest['count']}")
        return cls(index, manifest, use_gpu, tuning=tune(index, tuning or {}))

    def __len__(self) -> int:
        return self._n

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None,
               f: Filter | None = None, ann: dict[str, int] | None = None) -> tuple[Any, Any]:  # 2-D arrays: a row per query
        """Top k (exact for Flat); with `allowed` (a boolean mask over rows) only those rows are
        candidates (an ID selector), so a selective filter still fills k. The filter `f` itself
        is already in `allowed`. `ann` overrides the YAML's nprobe / efSearch for this search."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if allowed is not None:
            allowed = allowed[: len(self)]
        tuning = {**self.tuning, **check_ann(self._cpu, ann)} if ann else self.tuning  # checked even when empty
        k = min(k, len(self) if allowed is None else int(allowed.sum()))
        if k <= 0:  # an empty collection (or nothing allowed): no hits; FAISS asserts k > 0
            return np.empty((len(queries), 0), np.int64), np.empty((len(queries), 0), np.float32)
        faiss = _faiss()
        selector = None
        if allowed is not None:
            bitmap = np.packbits(allowed, bitorder="little")  # a local: alive while FAISS reads it
            selector = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
        elif self._n != self._cpu.ntotal:  # an older snapshot: rows appended since are not its own
            selector = faiss.IDSelectorRange(0, self._n)
        params = None if selector is None and not ann else search_parameters(self._cpu, selector, tuning)

        def search() -> tuple[Any, Any]:
            with self._lock.reading():
                if params is None:  # the index's own settings (set by tune) serve
                    return self._index.search(queries, k)
                return self._index.search(queries, k, params=params)

        scores, rows = on_compute_thread(search)
        return rows, scores

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        faiss = _faiss()
        if self._n != self._cpu.ntotal:
            raise IndexMismatchError("only the newest snapshot of an index can be saved")
        full = {**manifest, "kind": self.kind, "metric": "ip", "index_type": type(self._cpu).__name__}

        def write(path: Path) -> None:
            with self._lock.reading():
                faiss.write_index(self._cpu, str(path))

        self.manifest = publish(folder, full, write)
