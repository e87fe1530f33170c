"""SciFact through the MCP tools with Milvus holding everything (`index_backend_configs.milvus.full_text`
on Milvus Lite), beside the local FAISS + bm25s engine on the same corpus, vectors and queries.

Both sides are driven the way an agent drives them: a FastMCP client (in-memory transport) calls
retriever_init, retriever_index (and bm25_index for the local side), then bm25_search,
retriever_search and retriever_hybrid_search over SciFact's 300 test queries, 100 hits each, in
groups of 50; nDCG@10 and recall@100 as `retriever eval` computes them (search/evaluation.py).
Each full_text analyzer is a Milvus Lite database of its own:

- `bm25s`: the text is tokenized here as bm25s tokenizes it (lowercase, bm25s's English stop
  words, Snowball stems) and Milvus's BM25 function reads those terms from a field of their own;
- `milvus`: Milvus's analyzer reads the text itself (Lite 3.2.2: `\\w+`, lowercase, stop words,
  no stemmer).

The vectors are `index/scifact/embedding.npy` (the Makefile's SCIFACT paths), reused when its
manifest matches the corpus and the model, else made once through retriever_embed; a full_text
collection takes them from there instead of embedding the corpus again.

    nice -n 10 .venv/bin/python bench/fulltext_scifact.py [--analyzers bm25s,milvus]

Writes the "fulltext-scifact" section of bench/RESULTS.md (and of docs/past-one-machine.md) and prints it to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from report import SCIFACT, write_section

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "past-one-machine.md"

OUT = ROOT / "bench" / "out" / "fulltext_scifact"
EMBEDDING = ROOT / "index" / "scifact" / "embedding.npy"
MODES = {"bm25": "bm25_search", "dense": "retriever_search", "hybrid": "retriever_hybrid_search"}
GROUP, DEPTH = 50, 100


def project(folder: Path, **milvus: Any) -> Path:
    """parameter.yaml for SciFact in `folder`: the repository's defaults, SciFact's corpus and
    vectors; with `milvus` settings, index_backend milvus (full_text) instead of FAISS + bm25s."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
    cfg["corpus_path"] = str(SCIFACT / "corpus.jsonl")
    cfg["embedding_path"] = str(EMBEDDING)
    cfg["index_backend_configs"]["faiss"]["index_path"] = str(folder / "faiss")
    cfg["backend_configs"]["bm25"]["save_path"] = str(folder / "bm25")
    if milvus:
        cfg["index_backend"] = "milvus"
        cfg["index_backend_configs"]["milvus"] = {**cfg["index_backend_configs"].get("milvus", {}), **milvus}
    path = folder / "parameter.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Tools:
    """One engine behind a FastMCP client (in-memory transport), as an agent would call it."""

    def __init__(self, config: Path) -> None:
        from retriever.config import load_config
        from retriever.engine import Retriever
        from retriever.mcp.server import build_server

        self.server = build_server(Retriever(load_config(config), config.parent), profile="full")

    def call(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        from fastmcp import Client

        async def run() -> Any:
            async with Client(self.server) as client:
                return await client.call_tool(tool, args or {}, raise_on_error=False)

        result = asyncio.run(run())
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content[0].text}")
        if result.structured_content is not None:
            return result.structured_content
        return json.loads(result.content[0].text)  # a reply without a budget comes as text only


def queries() -> tuple[dict[str, str], Any]:
    from retriever.search.evaluation import load_qrels, load_queries

    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    return {q: t for q, t in load_queries(SCIFACT / "queries.jsonl").items() if q in qrels}, qrels


def measure(tools: Tools, texts: dict[str, str], qrels: Any) -> dict[str, dict[str, float]]:
    """nDCG@10, recall@100 and the seconds of the 300 queries, per mode."""
    from retriever.search.evaluation import evaluate

    qids, out = list(texts), {}
    for mode, tool in MODES.items():
        run: dict[str, list[tuple[str, float]]] = {}
        t = time.perf_counter()
        for start in range(0, len(qids), GROUP):
            part = qids[start:start + GROUP]
            reply = tools.call(tool, {"query_list": [texts[q] for q in part], "top_k": DEPTH, "return_text": False,
                                      "max_bytes": 0})  # ids and scores, every hit (no reply budget)
            assert not reply.get("truncated"), reply.get("truncated")
            for q, ids, scores in zip(part, reply["ret_ids"], reply["ret_scores"], strict=True):
                run[q] = list(zip(ids, scores, strict=True))
        seconds = time.perf_counter() - t
        metrics = evaluate(run, qrels)
        out[mode] = {"ndcg": metrics["ndcg@10"], "recall": metrics["recall@100"], "seconds": seconds}
        print(f"  {mode}: {out[mode]}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--analyzers", default="bm25s,milvus", help="full_text analyzers to measure, comma-separated")
    args = p.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    texts, qrels = queries()

    local = Tools(project(OUT / "local"))
    status = local.call("retriever_init")
    embedded = local.server.engine.embeddings_valid()  # index/scifact/embedding.npy matches corpus and model
    if not embedded:
        print("embedding SciFact (index/scifact/embedding.npy) ...", file=sys.stderr, flush=True)
        local.call("retriever_embed", {"overwrite": True})
    runtime = json.loads(EMBEDDING.with_name(EMBEDDING.name + ".json").read_text()).get("runtime", "?")
    local.call("retriever_index", {"overwrite": True})
    local.call("bm25_index", {"overwrite": True})
    print("local FAISS + bm25s", file=sys.stderr, flush=True)
    figures = {"local": measure(local, texts, qrels)}
    del local

    builds = {}
    for analyzer in [a.strip() for a in args.analyzers.split(",") if a.strip()]:
        # a Lite database per analyzer, the default collection: embedding_path is the collection's vectors
        tools = Tools(project(OUT / analyzer, uri=str(OUT / analyzer / "milvus.db"), full_text=True,
                              full_text_analyzer=analyzer))
        tools.call("retriever_init")
        t = time.perf_counter()
        built = tools.call("retriever_index", {"overwrite": True})
        builds[analyzer] = (time.perf_counter() - t, built.get("documents"))
        print(f"full_text, analyzer {analyzer}: indexed {built.get('documents')} in {builds[analyzer][0]:.1f} s",
              file=sys.stderr, flush=True)
        figures[analyzer] = measure(tools, texts, qrels)
        del tools

    import pymilvus

    lite = __import__("milvus_lite").__version__
    rows = []
    for mode in MODES:
        ref = figures["local"][mode]
        cells = [f"{figures[a][mode]['ndcg']:.4f} ({figures[a][mode]['ndcg'] - ref['ndcg']:+.4f}) / "
                 f"{figures[a][mode]['recall']:.4f} / {figures[a][mode]['seconds']:.1f}" for a in builds]
        rows.append(f"| {mode} | {ref['ndcg']:.4f} / {ref['recall']:.4f} / {ref['seconds']:.1f} | " + " | ".join(cells)
                    + " |")
    head = " | ".join(f"Milvus Lite full_text, analyzer `{a}`" for a in builds)
    body = [
        "Produced by `nice -n 10 .venv/bin/python bench/fulltext_scifact.py` on the shared 2-core machine "
        f"({platform.machine()}), {time.strftime('%Y-%m-%d')}: SciFact's {len(texts)} test queries through the MCP tools "
        f"(FastMCP client, in-memory transport), {DEPTH} hits a query in calls of {GROUP} queries; milvus-lite {lite}, "
        f"pymilvus {pymilvus.__version__}; vectors {'reused from' if embedded else 'made into'} "
        f"index/scifact/embedding.npy ({runtime}), the same for both sides; default parameter.yaml otherwise "
        f"(BM25 {status.get('bm25_method', 'lucene') if isinstance(status, dict) else 'lucene'}, hybrid adaptive).",
        "",
        "Each cell: nDCG@10 (difference to local) / recall@100 / seconds for the 300 queries.",
        "",
        f"| mode | local FAISS + bm25s | {head} |",
        "|---|---|" + "---|" * len(builds),
        *rows,
        "",
        "Index build through retriever_index (documents and their stored vectors into Milvus, BM25 by Milvus): "
        + "; ".join(f"`{a}` {s:.1f} s for {n} documents" for a, (s, n) in builds.items()) + ".",
        "",
    ]
    section = "## Milvus full_text on SciFact (issue 29)\n\n" + "\n".join(body)
    write_section("fulltext-scifact", section)
    if DOC.exists():  # docs/past-one-machine.md shows the same figures
        write_section("fulltext-scifact", section, DOC)
    print("\n".join(body), file=sys.stderr)


if __name__ == "__main__":
    main()
