"""What every index records of the corpus and the model it was built from (its manifest), so a
mismatch is refused at load. Pure functions of the corpus store and the embedder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..embedders import Embedder
    from .corpus import CorpusFile


def corpus_manifest(docs: CorpusFile | None) -> dict[str, Any]:
    """What every index built from the corpus file records of it."""
    return {"count": len(docs) if docs is not None else 0,
            "corpus_fingerprint": docs.fingerprint if docs is not None else None}


def dense_manifest(docs: CorpusFile | None, embedder: Embedder) -> dict[str, Any]:
    """What a dense index or embedding file made from `docs` with `embedder` records."""
    return {"model": embedder.model_id, "dimension": embedder.dimension, **corpus_manifest(docs)}


def runtime_record(embedder: Embedder) -> dict[str, Any]:
    """How the vectors were computed: recorded beside the manifest, not checked at load (every
    runtime of one model computes vectors of one space, within the bounds bench/RESULTS.md gives)."""
    return {"runtime": embedder.runtime}
