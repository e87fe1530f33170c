"""Search results unchanged by a refactor (issue 46): SciFact's nDCG@10 and Recall@100 for every
kind (dense, bm25, hybrid with each fusion: adaptive, rrf, convex) from two checkouts of this
repository, on one index built once (local FAISS + bm25s), with the vectors in Milvus Lite, and with
Milvus Lite holding documents, vectors and BM25 (full_text: search/stored.py's path).
Each checkout's `retriever eval` runs in its own process with PYTHONPATH at its servers/ (this
.venv's libraries); both read the same index files and the same Milvus Lite database.

    .venv/bin/python bench/search_unchanged.py --before <rev> [--after <rev>]

<rev> is a commit (a git worktree of it is made under the work folder); --after defaults to the
working tree. Writes section `search-unchanged` of bench/QUALITY.md with the two columns and
whether they are equal to 4 decimals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from report import ROOT, SCIFACT, checkout, remove_checkouts, write_section

QUALITY = ROOT / "bench" / "QUALITY.md"
RUNS = [("dense", {}), ("bm25", {}), ("hybrid", {"hybrid.fusion": "adaptive"}),
        ("hybrid", {"hybrid.fusion": "rrf"}), ("hybrid", {"hybrid.fusion": "convex", "hybrid.vector_weight": "0.5"})]


BACKENDS = {"local": "FAISS + bm25s", "milvus": "Milvus Lite (vectors; BM25 local)",
            "held": "Milvus Lite full_text (holds documents, vectors, BM25)"}


def sets(folder: Path, backend: str) -> list[str]:
    out: dict[str, object] = {"corpus_path": SCIFACT / "corpus.jsonl", "embedding_path": folder / "embedding.npy",
           "docs_path": folder / "docs", "index_backend_configs.faiss.index_path": folder / "faiss",
           "backend_configs.bm25.save_path": folder / "bm25"}
    if backend != "local":
        out |= {"index_backend": "milvus", "index_backend_configs.milvus.uri": folder / f"{backend}.db"}
    if backend == "held":
        out |= {"index_backend_configs.milvus.full_text": "true"}
    return [a for k, v in out.items() for a in ("--set", f"{k}={v}")]


def retriever(servers: Path, command: str, *args: str) -> str:
    """`retriever <command>` of the checkout at `servers`, with that checkout's parameter.yaml."""
    env = {**os.environ, "PYTHONPATH": str(servers)}
    config = ["--config", str(servers.parent / "parameter.yaml")]
    proc = subprocess.run([sys.executable, "-m", "retriever", command, *config, *args], env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"retriever {command} failed: {proc.stderr[-2000:]}")
    return proc.stdout


def build_held(servers: Path, folder: Path) -> None:
    """The full_text collection, by the library (the CLI's index embeds a corpus file first, which a
    collection the backend holds has not): Milvus embeds nothing, the vectors come from the embedding file."""
    items = [a for a in sets(folder, "held") if a != "--set"]
    code = ("import sys, json; from pathlib import Path; from retriever.cli import parse_sets; "
            "from retriever.config import load_config; from retriever.engine.retriever import Retriever; "
            "e = Retriever(load_config(Path(sys.argv[1]), parse_sets(json.loads(sys.argv[2]))), Path(sys.argv[1]).parent); "
            "e.init(); print(e.index())")
    proc = subprocess.run([sys.executable, "-c", code, str(servers.parent / "parameter.yaml"), json.dumps(items)],
                          env={**os.environ, "PYTHONPATH": str(servers)}, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"the full_text build failed: {proc.stderr[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare with (e.g. landed main)")
    ap.add_argument("--after", help="the commit measured (default: the working tree)")
    ap.add_argument("--work", type=Path, help="where the index and the worktrees go (default: a temporary folder)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="search-unchanged-"))
    work.mkdir(parents=True, exist_ok=True)
    trees = {"before": checkout(args.before, work), "after": checkout(args.after, work)}
    qrels = ["--queries", str(SCIFACT / "queries.jsonl"), "--qrels", str(SCIFACT / "qrels" / "test.tsv"), "--json"]
    rows, equal = [], True
    for backend, label in BACKENDS.items():
        folder = work / "index"
        if not (folder / "faiss").exists():
            print("building SciFact's indexes (once)", file=sys.stderr)
            retriever(trees["after"], "index", *sets(folder, "local"))
        if backend == "milvus" and not (folder / f"{backend}.db").exists():
            retriever(trees["after"], "index", "--mode", "dense", *sets(folder, backend))
        if backend == "held" and not (folder / f"{backend}.db").exists():
            build_held(trees["after"], folder)
        for mode, options in RUNS:
            extra = [a for k, v in options.items() for a in ("--set", f"{k}={v}")]
            got = {}
            for side, servers in trees.items():
                print(f"{backend} {mode} {options} {side}", file=sys.stderr)
                m = json.loads(retriever(servers, "eval", *sets(folder, backend), *extra, "--mode", mode, *qrels))
                got[side] = (round(m["ndcg@10"], 4), round(m["recall@100"], 4))
            same = got["before"] == got["after"]
            equal &= same
            name = mode if not options else f"{mode} ({options['hybrid.fusion']})"
            rows.append(f"| {label} | {name} | {got['before'][0]:.4f} / "
                        f"{got['before'][1]:.4f} | {got['after'][0]:.4f} / {got['after'][1]:.4f} | "
                        f"{'yes' if same else 'NO'} |")
    after = args.after or "the working tree"
    body = (f"`.venv/bin/python bench/search_unchanged.py --before {args.before}"
            f"{' --after ' + args.after if args.after else ''}`: SciFact test queries (300), one index built "
            f"once, each checkout's `retriever eval` in its own process.\n\n"
            f"| backend | kind | before ({args.before}) nDCG@10 / Recall@100 | after ({after}) | equal |\n"
            "|---|---|---|---|---|\n" + "\n".join(rows) + f"\n\nAll equal to 4 decimals: {'yes' if equal else 'NO'}.\n")
    write_section("search-unchanged", body, QUALITY)
    print(body)
    if args.work is None:  # a temporary folder: its worktrees go with it (a --work folder keeps them for the next run)
        remove_checkouts(work)


if __name__ == "__main__":
    main()
