"""A corpus of long documents as a corpus of chunks: written once beside the collection's change
log as `chunks-<key>.jsonl` (the key: the source's sha256 and the chunking settings), atomically,
and reused while neither changes; older chunk files of ours are removed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

from ..config import Config
from ..errors import ConfigError
from ..store.corpus import CorpusFile
from .pieces import pieces_for
from .split import chunk_records, chunks_of

log = logging.getLogger(__name__)
_OURS = re.compile(r"chunks-[0-9a-f]{16}\.jsonl")


def chunked_corpus(cfg: Config) -> Path:
    """The chunk file of `cfg`'s corpus under `cfg.chunking` (written if missing)."""
    if cfg.corpus_path is None:
        raise ConfigError("chunking needs a corpus file (corpus_path)")
    source = CorpusFile.open(cfg.corpus_path, cfg.duplicate_ids)
    c = cfg.chunking
    pieces = pieces_for(cfg, c)
    settings = json.dumps({**c.model_dump(), **({"pieces": pieces.name} if pieces else {})}, sort_keys=True)
    key = hashlib.sha256(f"{source.fingerprint}\n{settings}".encode()).hexdigest()[:16]
    folder = cfg.paths().docs.parent
    target = folder / f"chunks-{key}.jsonl"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    count = 0
    with tmp.open("w", encoding="utf-8") as f:
        for row in range(len(source)):
            doc = source.get(row)
            for record in chunk_records({**doc.metadata}, doc.text, chunks_of(doc.text, c, pieces=pieces), doc.id):
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    os.replace(tmp, target)
    for old in folder.iterdir():
        if old != target and _OURS.fullmatch(old.name):
            old.unlink()
    log.info("chunked %d documents of %s into %d chunks (%s): %s", len(source), cfg.corpus_path, count, settings,
             target)
    return target
