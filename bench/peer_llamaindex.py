"""The peer of bench/sync_bench.py: a folder through LlamaIndex's SimpleDirectoryReader (file
paths as ids) and an IngestionPipeline (SentenceSplitter, then the embedding) with a docstore
whose strategy is upserts-and-delete, into a SimpleVectorStore; persisted, so a second run
(`again`) re-reads the folder and re-embeds only documents whose hash changed. The embedding is
this project's own (MiniLM on the same runtime), so the embed stage costs the same on both sides.
LlamaIndex has no reader for gzip: the bench gives SimpleDirectoryReader one (`Gunzip`, what its
user would write), so both sides index the same changelogs; SentenceSplitter cuts as our sync does
(128 tokens, 16 shared; its tokens are tiktoken's, and the file's metadata counts in them).

Run with a venv that has llama-index-core, its file readers (llama-index-readers-file 0.7.0 with
html2text and docx2txt: without them PDF, DOCX, PPTX, XLSX and EPUB are read as text) and sees this
project's .venv (a .pth file):
    .cache/bench-venv/bin/python bench/peer_llamaindex.py FOLDER STORE full|again|parse
Prints one JSON line: files, chunks, wall and seconds per stage."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from llama_index.core import Document, SimpleDirectoryReader
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.readers.base import BaseReader
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores import SimpleVectorStore

SECONDS: dict[str, float] = {"parse": 0.0, "chunk": 0.0, "embed": 0.0}
EMBEDDER: Any = None
EMBEDDED: list[str] = []


class Ours(BaseEmbedding):
    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        t = time.perf_counter()
        out = EMBEDDER.encode_passages(texts).tolist()
        SECONDS["embed"] += time.perf_counter() - t
        EMBEDDED.extend(texts)  # counted in model tokens after the run, outside the timing
        return out  # type: ignore[no-any-return]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return EMBEDDER.encode_queries([query])[0].tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class Gunzip(BaseReader):
    """A .gz file as its inflated text (UTF-8, undecodable bytes replaced)."""

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **kw: Any) -> list[Document]:
        import gzip

        return [Document(text=gzip.decompress(Path(file).read_bytes()).decode("utf-8", "replace"),
                         metadata=extra_info or {})]


def read(folder: Path) -> list[Any]:
    return SimpleDirectoryReader(str(folder), recursive=True, filename_as_id=True, raise_on_error=False,
                                 file_extractor={".gz": Gunzip()}).load_data()


class Timed(SentenceSplitter):
    def __call__(self, nodes: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        out = super().__call__(nodes, **kw)
        SECONDS["chunk"] += time.perf_counter() - t
        return out


def main() -> None:
    global EMBEDDER
    from retriever.config import Config
    from retriever.embedders import build_embedder

    folder, store, stage = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    EMBEDDER = build_embedder(Config())
    start = time.perf_counter()
    t = time.perf_counter()
    docs = read(folder)
    SECONDS["parse"] = time.perf_counter() - t
    if stage == "parse":  # the reader alone, a second time (the first warmed its imports)
        t = time.perf_counter()
        docs = read(folder)
        print(json.dumps({"files": len({d.metadata.get("file_path") for d in docs}), "documents": len(docs),
                          "seconds": {"parse": time.perf_counter() - t, "parse_cold": SECONDS["parse"]},
                          "file_readers": _file_readers()}))
        return
    pipeline = IngestionPipeline(transformations=[Timed(chunk_size=128, chunk_overlap=16), Ours(embed_batch_size=64)],
                                 docstore=SimpleDocumentStore(), vector_store=SimpleVectorStore(),
                                 docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE)
    if stage == "again":
        pipeline.load(str(store))
    t = time.perf_counter()
    nodes = pipeline.run(documents=docs, show_progress=False)
    run = time.perf_counter() - t
    t = time.perf_counter()
    pipeline.persist(str(store))
    persist = time.perf_counter() - t
    files = len({d.metadata.get("file_path") for d in docs})
    raw_gz = len({d.metadata.get("file_path") for d in docs
                  if str(d.metadata.get("file_path", "")).endswith(".gz") and d.text.startswith("\x1f")})
    wall = time.perf_counter() - start
    from sync_bench import model_tokens

    print(json.dumps({"files": files, "chunks": len(nodes), "gz_read_as_compressed_bytes": raw_gz, "wall": wall,
                      **model_tokens(EMBEDDED),
                      "seconds": {**SECONDS, "index": run - SECONDS["chunk"] - SECONDS["embed"] + persist},
                      "note": "a PDF read per page is several documents; `index`: the pipeline's docstore and vector "
                              "store work and its persist"}))


def _file_readers() -> str:
    """Which of LlamaIndex's file readers SimpleDirectoryReader has (llama-index-readers-file, the
    package its own warning names for PDF, DOCX, PPTX, XLSX, EPUB; without it every file is read as text)."""
    try:
        from importlib.metadata import version

        return f"llama-index-readers-file {version('llama-index-readers-file')}"
    except Exception:
        return "none: every file read as text"


if __name__ == "__main__":
    main()
