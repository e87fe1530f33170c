"""The `sparse` retriever kind: learned-sparse retrieval (SPLADE and its kin) with
sentence-transformers' SparseEncoder over any SPLADE-style folder (a masked-language-model head,
max pooling of log(1 + relu(logits))), its document vectors in an inverted index on disk
(indexes/inverted.py).

The index follows the collection: `build` encodes its live documents; each add encodes its
documents at once and publishes the grown index after the change log's commit (`follow`, called by
engine/changes.py); a session whose collection still has rows the index has not seen (a crash
between the change log's commit and the index's) encodes only those rows and publishes the grown
index before searching (`index_for`), and one that holds an older copy than the folder's reads the
folder's. Deleted and replaced documents are masked out at search, as in BM25. In hybrid
search, `sparse.hybrid` puts the sparse list beside dense and BM25 (`fused`) or in BM25's place
(`instead_of_bm25`): search/hybrid.py `ranked`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..config.ranking import SparseConfig
from ..errors import IndexMismatchError, IndexMissingError, MissingDependencyError, NotYetSupportedError
from ..indexes.inverted import InvertedIndex
from ..store.manifests import corpus_manifest
from .fusion import expit

log = logging.getLogger(__name__)
ENCODE_CHUNK = 1024  # texts encoded, then turned into scipy rows, at a time (bounds the dense logits)
SPARSE_SCALE = 8.0  # scale_score: expit(s / 8), as BM25


def folder_of(cfg: Config) -> Path:
    """The collection's sparse index folder: sparse.save_path, or collections_path/<name>/sparse."""
    if not cfg.collection_name:
        return cfg.sparse.save_path
    return cfg.collections_path / cfg.collection_name / "sparse"


@functools.lru_cache(maxsize=2)
def _encoder(path: str, max_seq_length: int | None) -> Any:
    try:
        from sentence_transformers import SparseEncoder
        from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling
    except ImportError as e:
        raise MissingDependencyError("sentence-transformers>=5", "mcp-retriever") from e
    import warnings

    with warnings.catch_warnings():  # MLMTransformer's deprecation notice: still the documented SPLADE recipe
        warnings.simplefilter("ignore", DeprecationWarning)
        transformer = MLMTransformer(path, max_seq_length=max_seq_length)
    return SparseEncoder(modules=[transformer, SpladePooling("max")], device="cpu")


def _scipy(tensor: Any, width: int) -> Any:
    """A torch sparse (COO) batch of vectors as a scipy CSR matrix (float32)."""
    import scipy.sparse as sp

    t = tensor.coalesce()
    rows, cols = t.indices().cpu().numpy()
    return sp.csr_matrix((t.values().float().cpu().numpy(), (rows, cols)), shape=(t.shape[0], width), dtype=np.float32)


@dataclass(frozen=True)
class SparseModel:
    """A SPLADE-style model folder, loaded once per process."""

    path: str
    batch_size: int = 32
    max_seq_length: int | None = 256

    @classmethod
    def of(cls, cfg: SparseConfig) -> SparseModel:
        if not cfg.model_name_or_path:
            raise NotYetSupportedError("sparse search: parameter.yaml names no sparse model (sparse.model_name_or_path, "
                                       "a SPLADE-style folder; scripts/splade_tiny.sh fetches SPLADE-tiny)")
        return cls(cfg.model_name_or_path, cfg.batch_size, cfg.max_seq_length)

    @property
    def encoder(self) -> Any:
        return _encoder(self.path, self.max_seq_length)

    @property
    def record(self) -> dict[str, Any]:
        """What an index records of its model (refused at load if it differs)."""
        return {"model": Path(self.path).name, "vocabulary": self.vocabulary, "max_seq_length": self.max_seq_length}

    @property
    def vocabulary(self) -> int:
        """The dimension of the vectors: the masked-language model's vocabulary."""
        return int(self.encoder[0].model.config.vocab_size)

    def queries(self, texts: Sequence[str]) -> Any:
        return self._encode(self.encoder.encode_query, texts)

    def documents(self, texts: Sequence[str], progress: bool = False) -> Any:
        return self._encode(self.encoder.encode_document, texts, progress)

    def _encode(self, fn: Callable[..., Any], texts: Sequence[str], progress: bool = False) -> Any:
        """`texts` encoded an ENCODE_CHUNK at a time (a bar on stderr with `progress`, as the
        dense build's)."""
        import sys

        import scipy.sparse as sp
        from tqdm import tqdm

        width = self.vocabulary
        parts = []
        with tqdm(total=len(texts), desc="sparse", unit="doc", file=sys.stderr, disable=not progress) as bar:
            for i in range(0, len(texts), ENCODE_CHUNK):
                chunk = list(texts[i : i + ENCODE_CHUNK])
                parts.append(_scipy(fn(chunk, batch_size=self.batch_size, show_progress_bar=False,
                                       convert_to_sparse_tensor=True), width))
                bar.update(len(chunk))
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, width), dtype=np.float32)


def encoder_of(cfg: Config) -> SparseModel | None:
    """The sparse model a backend that keeps its own vectors is handed (indexes.base.View.sparse:
    Milvus holding the documents), None where parameter.yaml names none or the documents are images."""
    if not cfg.sparse.model_name_or_path or cfg.is_multimodal:
        return None
    return SparseModel.of(cfg.sparse)


# ---- the index of a session's collection -------------------------------------------------------

_lock = threading.Lock()  # one catch-up at a time
_current: dict[str, InvertedIndex] = {}  # folder -> the newest index this process loaded or built


def _coverage(s: Any) -> dict[str, Any]:
    return {**corpus_manifest(s.docs), "collection_rows": s.collection.rows,
            "log_generation": s.collection.changes.generation}


def build(s: Any, overwrite: bool, progress: bool = False) -> dict[str, Any]:
    """Encode the session's live documents and publish the index (refused over an existing one
    unless `overwrite`; a progress bar on stderr with `progress`)."""
    from ..errors import AlreadyExistsError
    from ..store.persist import read_manifest

    model = SparseModel.of(s.config.sparse)
    folder = folder_of(s.config)
    if read_manifest(folder) is not None and not overwrite:
        raise AlreadyExistsError(f"a sparse index exists at {folder}; pass overwrite=true to rebuild it")
    if not len(s.collection):
        raise IndexMissingError("the collection has no documents; set corpus_path or call retriever_add")
    rows = s.collection.live_rows()
    vectors = model.documents(list(s.collection.texts(rows.tolist())), progress)
    index = InvertedIndex.build(vectors, rows, {**model.record, **_coverage(s)})
    index.save(folder, {})
    with _lock:
        _current[str(folder)] = index
    return {"save_path": str(folder), "documents": len(index), "model": model.record["model"],
            "vocabulary": index.vocabulary, "postings": int(index.postings.nnz)}


def index_for(s: Any) -> InvertedIndex:
    """The sparse index covering the session's collection: the newest this process holds or the
    saved one, with the rows added since encoded and published (kept in memory only when the
    server is read-only)."""
    folder = folder_of(s.config)
    model = SparseModel.of(s.config.sparse)
    with _lock:
        index = _current.get(str(folder))
        if index is None:
            index = InvertedIndex.load(folder)
            if index is None:
                raise IndexMissingError("no sparse index is loaded; build it with Retriever.sparse_index() "
                                        "(sparse.model_name_or_path names the model)")
            _check(index, model, s, folder)
        else:  # this process's newest: its model and corpus still this session's (a newer snapshot may hold more rows)
            _check(index, model, s, folder, rows=False)
        covered = int(index.manifest.get("collection_rows", 0))
        if covered < s.collection.rows and _newer_saved(folder, covered, s.collection.rows):  # encoded elsewhere
            index = InvertedIndex.load(folder) or index
            _check(index, model, s, folder)
            covered = int(index.manifest.get("collection_rows", 0))
        if covered < s.collection.rows:
            new = np.flatnonzero(s.collection.live[covered:]) + covered
            vectors = model.documents(list(s.collection.texts(new.tolist())))
            index = index.with_added(vectors, new, _coverage(s))
            if not s.config.security.read_only:
                index.save(folder, {})
            log.info("sparse index: %d documents added since its build encoded", len(new))
        _current[str(folder)] = index
        return index


def _newer_saved(folder: Path, covered: int, rows: int) -> bool:
    """Whether the folder's published index covers more than `covered` rows and at most this
    session's `rows` (another process's writes, encoded and published there)."""
    from ..store.persist import read_manifest

    saved = read_manifest(folder)
    return saved is not None and covered < int(saved.get("collection_rows", 0)) <= rows


def follow(s: Any) -> None:
    """After a change's commit (engine/changes.py): where the collection has a sparse index, encode
    the added rows now and publish it, so that no search pays for them. The change log is the commit
    point: a crash before this publish leaves rows the next session's index_for encodes; a failure
    here (the model changed since the build) is logged and left to the next search, which names the fix."""
    from ..errors import RetrieverError
    from ..store.persist import read_manifest

    if not s.config.sparse.model_name_or_path or s.config.is_multimodal:
        return
    folder = folder_of(s.config)
    with _lock:
        known = str(folder) in _current
    if not known and read_manifest(folder) is None:
        return
    try:
        index_for(s)
    except RetrieverError as e:
        log.warning("sparse index not brought up to the change: %s", e)


def _check(index: InvertedIndex, model: SparseModel, s: Any, folder: Path, rows: bool = True) -> None:
    want = {**model.record, **corpus_manifest(s.docs)}
    wrong = [f"{k}: saved {index.manifest.get(k)!r}, now {v!r}" for k, v in want.items() if index.manifest.get(k) != v]
    if rows and (int(index.manifest.get("collection_rows", 0)) > s.collection.rows or int(
            index.manifest.get("log_generation", 0)) > s.collection.changes.generation):
        wrong.append("built over changes the change log does not have")
    if wrong:
        raise IndexMismatchError(f"{folder} does not match this session ({'; '.join(wrong)}); call "
                                 "sparse_index(overwrite=true)")


def forget(folder: Path) -> None:
    """Drop this process's copy of a folder's index (tests; a folder rebuilt by another process)."""
    with _lock:
        _current.pop(str(folder), None)


# ---- the retriever kind --------------------------------------------------------------------------

def _bounded(allowed: np.ndarray | None, index: InvertedIndex, rows: int) -> np.ndarray | None:
    """The candidate mask over every row the index may hold (an older snapshot's session has fewer)."""
    top = int(index.rows.max()) + 1 if len(index.rows) else 0
    if allowed is None:
        if top <= rows:
            return None
        allowed = np.ones(rows, dtype=bool)
    if len(allowed) >= top:
        return allowed
    return np.concatenate([allowed, np.zeros(top - len(allowed), dtype=bool)])


@dataclass(frozen=True)
class Sparse:
    name: str = "sparse"

    def rows(self, s: Any, queries: list[str], depth: int,
             allowed: Any) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray]]:
        if s.config.is_multimodal:
            raise NotYetSupportedError("sparse search: this collection holds images (is_multimodal), which have no "
                                       "text for a sparse model; search them with retriever_search")
        index = index_for(s)
        vectors = SparseModel.of(s.config.sparse).queries(queries)
        return index.search(vectors, depth, _bounded(allowed[0], index, s.collection.rows))

    def rank(self, s: Any, queries: list[str], depth: int, allowed: Any) -> list[Any]:
        rows, scores = self.rows(s, queries, depth, allowed)
        return [(r, sc, None) for r, sc in zip(rows, scores)]

    def depth(self, k: int) -> int:
        return k

    def scale(self, s: Any) -> Callable[[float], float]:
        return lambda x: expit(x / SPARSE_SCALE)
