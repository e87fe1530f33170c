"""Peak memory of the headless path against the library's: SciFact's dense + BM25 indexes built by
`retriever index --overwrite` and by the same calls through the Python API (init, embed, index,
bm25_index), and a folder of 300 files of /usr/share/doc synced by `retriever sync` and by
`Retriever.sync`, each in a fresh process under /usr/bin/time (maximum resident set size), into
folders of their own under bench/out/headless. One more row runs `retriever index` with glibc's
malloc bounded as the CLI did before (one arena, a 256 KiB mmap threshold: the same settings as
memory.bound_malloc, through glibc's environment variables). Writes section `headless_memory`
of bench/RESULTS.md.

    .venv/bin/python bench/headless_memory.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from report import ROOT, SCIFACT, write_section

OUT = ROOT / "bench" / "out" / "headless"
API = """
import sys
from retriever.cli import parse_sets
from retriever.config import load_config
from retriever.engine.retriever import Retriever
e = Retriever(load_config(sys.argv[1], parse_sets(sys.argv[2:])), None)
e.init(overwrite=True)
e.embed(overwrite=True, progress=False)
e.index(overwrite=True)
e.bm25_index(overwrite=True, progress=False)
"""
SYNC = """
import sys
from retriever import Retriever
e = Retriever.from_yaml(sys.argv[1])
e.init()
e.sync(e.config.sources)
"""
BOUNDED = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(256 * 1024), "MALLOC_TRIM_THRESHOLD_": str(1 << 20)}


def sets(out: Path) -> list[str]:
    return [f"corpus_path={SCIFACT / 'corpus.jsonl'}", f"embedding_path={out / 'embedding.npy'}",
            f"index_backend_configs.faiss.index_path={out / 'faiss'}", f"backend_configs.bm25.save_path={out / 'bm25'}",
            f"docs_path={out / 'docs'}"]


def folder(n: int) -> Path:
    import shutil

    import yaml

    docs = OUT / "docs"
    if docs.exists():
        shutil.rmtree(docs)
    files = [p for p in sorted(Path("/usr/share/doc").rglob("*"))
             if p.is_file() and not p.is_symlink() and p.suffix not in (".png", ".gif", ".pdf")][:n]
    for p in files:
        dest = docs / p.relative_to("/usr/share/doc")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
    for side in ("cli", "api"):
        cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
        out = OUT / f"sync-{side}"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        cfg.update(corpus_path=None, embedding_path=str(out / "embedding.npy"), docs_path=str(out / "docs"),
                   sources=[{"path": str(docs)}])
        cfg["backend_configs"]["bm25"]["save_path"] = str(out / "bm25")
        cfg["index_backend_configs"]["faiss"]["index_path"] = str(out / "faiss")
        (out / "parameter.yaml").write_text(yaml.safe_dump(cfg))
    return docs


def peak(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    import os

    t = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})
    return int(proc.stderr.strip().splitlines()[-1]) / 1024, time.perf_counter() - t


def main() -> None:
    python = sys.executable
    retriever = str(Path(python).parent / "retriever")
    config = str(ROOT / "parameter.yaml")
    rows = []
    index = [retriever, "--log-level", "WARNING", "index", "--overwrite", "--config", config,
             *[a for s in sets(OUT / "cli") for a in ("--set", s)]]
    folder(300)
    for name, cmd, env in (
        ("SciFact: retriever index --overwrite", index, None),
        ("SciFact: Python API (init, embed, index, bm25_index)", [python, "-c", API, config, *sets(OUT / "api")], None),
        ("SciFact: retriever index --overwrite, malloc bounded as before", index, BOUNDED),
        ("300 files: retriever sync", [retriever, "--log-level", "WARNING", "sync", "--config",
                                       str(OUT / "sync-cli" / "parameter.yaml")], None),
        ("300 files: Python API (Retriever.sync)", [python, "-c", SYNC, str(OUT / "sync-api" / "parameter.yaml")], None),
    ):
        mb, s = peak(cmd, env)
        rows.append(f"| {name} | {mb:,.0f} | {s:.0f} |")
    body = "\n".join([
        "## Peak memory of the headless path (bench/headless_memory.py)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run: SciFact's 5,183 abstracts, dense (FAISS) and BM25 indexes "
        "built from nothing, and 300 files of /usr/share/doc synced into an empty collection, each in a fresh "
        "process; maximum resident set size from /usr/bin/time.", "",
        "| path | peak RSS MB | wall s |", "|---|---|---|", *rows])
    write_section("headless_memory", body)
    print(body)


if __name__ == "__main__":
    main()
