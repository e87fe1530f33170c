"""Peak memory of the headless path against the library's: SciFact's dense + BM25 indexes built by
`retriever index --overwrite` and by the same calls through the Python API (init, embed, index,
bm25_index), each in a fresh process under /usr/bin/time (maximum resident set size), into
folders of their own under bench/out/headless. Writes section `headless_memory` of bench/RESULTS.md.

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


def sets(out: Path) -> list[str]:
    return [f"corpus_path={SCIFACT / 'corpus.jsonl'}", f"embedding_path={out / 'embedding.npy'}",
            f"index_backend_configs.faiss.index_path={out / 'faiss'}", f"backend_configs.bm25.save_path={out / 'bm25'}",
            f"docs_path={out / 'docs'}"]


def peak(cmd: list[str]) -> tuple[float, float]:
    t = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, check=True)
    return int(proc.stderr.strip().splitlines()[-1]) / 1024, time.perf_counter() - t


def main() -> None:
    python = sys.executable
    retriever = str(Path(python).parent / "retriever")
    config = str(ROOT / "parameter.yaml")
    rows = []
    for name, cmd in (
        ("retriever index --overwrite", [retriever, "--log-level", "WARNING", "index", "--overwrite", "--config", config,
                                         *[a for s in sets(OUT / "cli") for a in ("--set", s)]]),
        ("Python API (init, embed, index, bm25_index)", [python, "-c", API, config, *sets(OUT / "api")]),
    ):
        mb, s = peak(cmd)
        rows.append(f"| {name} | {mb:,.0f} | {s:.0f} |")
    body = "\n".join([
        "## Peak memory of the headless path (bench/headless_memory.py)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run: SciFact's 5,183 abstracts, dense (FAISS) and BM25 indexes "
        "built from nothing, each in a fresh process; maximum resident set size from /usr/bin/time.", "",
        "| path | peak RSS MB | wall s |", "|---|---|---|", *rows])
    write_section("headless_memory", body)
    print(body)


if __name__ == "__main__":
    main()
