"""An inverted index of sparse vectors (learned-sparse retrieval: SPLADE and its kin), on disk.

The documents' vectors are one term-major matrix (vocabulary x documents, CSR: each term's row is
its posting list of documents and weights). A query's score for a document is the dot product of
their vectors: the query's terms' posting lists, weighted by the query's weights, summed. Only
documents that share a term with the query are results.

The folder follows store/persist.py (crash-safe): a manifest naming one data version, written
whole under a fresh name before the manifest switches to it. The manifest records the model, the
corpus and the change log it covers (`collection_rows`, `log_generation`), so a session can bring
an older index up to its collection by encoding only the rows added since (search/learned_sparse.py).
Deleted and replaced documents stay in the matrix and are masked out at search, as in BM25.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IndexMismatchError
from ..store.persist import publish, read_manifest
from .topk import top_k

MATRIX = "postings.npz"
ROWS = "rows.npy"


class InvertedIndex:
    kind = "sparse"

    def __init__(self, postings: Any, rows: np.ndarray, manifest: dict[str, Any]) -> None:
        self.postings = postings  # scipy CSR, vocabulary x documents (float32)
        self.rows = np.asarray(rows, dtype=np.int64)  # document position -> collection row
        self.manifest = manifest

    @classmethod
    def build(cls, vectors: Any, rows: np.ndarray, manifest: dict[str, Any]) -> InvertedIndex:
        """From documents x vocabulary vectors (scipy sparse) at collection `rows`."""
        import scipy.sparse as sp

        matrix = sp.csr_matrix(vectors, dtype=np.float32)
        if matrix.shape[0] != len(rows):
            raise ValueError(f"{matrix.shape[0]} vectors for {len(rows)} rows")
        postings = matrix.T.tocsr()
        postings.sum_duplicates()
        postings.eliminate_zeros()
        return cls(postings, rows, dict(manifest))

    @property
    def vocabulary(self) -> int:
        return int(self.postings.shape[0])

    def __len__(self) -> int:
        return int(self.postings.shape[1])

    def with_added(self, vectors: Any, rows: np.ndarray, manifest: dict[str, Any]) -> InvertedIndex:
        """This index and the documents `vectors` at collection `rows` (a new matrix; this one unchanged)."""
        import scipy.sparse as sp

        added = InvertedIndex.build(vectors, rows, manifest)
        if added.vocabulary != self.vocabulary:
            raise IndexMismatchError(f"vectors of {added.vocabulary} terms added to an index of {self.vocabulary}")
        postings = sp.hstack([self.postings, added.postings], format="csr")
        return InvertedIndex(postings, np.concatenate([self.rows, added.rows]), {**self.manifest, **manifest})

    def live_documents(self, live: np.ndarray) -> int:
        return int(np.count_nonzero(live[self.rows])) if len(self.rows) else 0

    def search(self, queries: Any, k: int, allowed: np.ndarray | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per query (rows of `queries`, queries x vocabulary, scipy sparse): the collection rows of
        its top `k` documents, best first (ties by row), and their scores. `allowed` (a boolean mask
        over collection rows) removes every other row before the top k is taken."""
        import scipy.sparse as sp

        q = sp.csr_matrix(queries, dtype=np.float32)
        if q.shape[1] != self.vocabulary:
            raise IndexMismatchError(f"query vectors of {q.shape[1]} terms for an index of {self.vocabulary}; the "
                                     "sparse model changed since the index was built (sparse_index overwrite=true)")
        keep = None if allowed is None else allowed[self.rows]
        scores = (q @ self.postings).tocsr()  # queries x documents, only documents sharing a term
        rows_out, scores_out = [], []
        for i in range(scores.shape[0]):
            lo, hi = scores.indptr[i], scores.indptr[i + 1]
            docs, values = scores.indices[lo:hi], scores.data[lo:hi]
            matched = values > 0
            if keep is not None:
                matched &= keep[docs]
            docs, values = docs[matched], values[matched]
            # best first; equal scores by collection row (deterministic)
            order = top_k(values.astype(np.float64), min(k, len(values))) if len(values) else np.empty(0, np.int64)
            found_rows, found = self.rows[docs[order]], values[order]
            tie = np.lexsort((found_rows, -found))
            rows_out.append(found_rows[tie])
            scores_out.append(found[tie].astype(np.float32))
        return rows_out, scores_out

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        import scipy.sparse as sp

        def write(path: Path) -> None:
            path.mkdir(parents=True)
            sp.save_npz(path / MATRIX, self.postings, compressed=False)
            np.save(path / ROWS, self.rows)

        self.manifest = publish(folder, {**self.manifest, **manifest, "kind": self.kind,
                                         "documents": len(self), "vocabulary": self.vocabulary}, write)

    @classmethod
    def load(cls, folder: Path) -> InvertedIndex | None:
        """The folder's index, or None where nothing was ever published there."""
        import scipy.sparse as sp

        manifest = read_manifest(folder)
        if manifest is None:
            return None
        if manifest.get("kind") != cls.kind:
            raise IndexMismatchError(f"{folder} holds a {manifest.get('kind')!r} index, not a sparse one")
        data = folder / manifest["data"]
        postings = sp.load_npz(data / MATRIX).tocsr()
        rows = np.load(data / ROWS)
        if postings.shape[1] != len(rows):
            raise IndexMismatchError(f"{folder}: {postings.shape[1]} documents and {len(rows)} rows; rebuild with "
                                     "sparse_index(overwrite=true)")
        return cls(postings, rows, manifest)
