"""Peak memory of one ingest of a long text (issue 45: a 14 MiB text peaked at 2.5 GB): 11 MiB of
words cut into 200-word chunks (8,056), ingested through the library after a small warm-up ingest
(the model loaded). Prints the chunk count, the seconds and the peak RSS before and after.

    .venv/bin/python bench/ingest_memory.py [--batch-size 32] [--unbounded]

`--unbounded` lifts embedders/exported.py's BATCH_TOKENS (batch_size rows whatever their width:
the behaviour before it), for the figure to compare with.
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def peak_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--unbounded", action="store_true")
    args = ap.parse_args()
    if args.unbounded:
        from retriever.embedders import exported

        exported.BATCH_TOKENS = 1 << 30
    from retriever.testing.projects import engine_for, write_project

    with tempfile.TemporaryDirectory() as tmp:
        config = write_project(Path(tmp) / "p")
        e = engine_for(config, {"chunking": {"by": "word", "length": 200, "overlap": 20},
                                "batch_size": args.batch_size})
        e.init()
        rng = random.Random(0)
        words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()
        text = " ".join(f"{rng.choice(words)}{rng.randint(0, 999)}" for _ in range(1_450_000))
        e.ingest("warm", "a small warm-up text " * 50)
        before, start = peak_mb(), time.perf_counter()
        report = e.ingest("big", text)
        print(f"{len(text) / 2**20:.1f} MiB, {len(report['ids'])} chunks, batch_size {args.batch_size}"
              f"{', unbounded' if args.unbounded else ''}: "
              f"{time.perf_counter() - start:.1f} s, peak RSS {before} MB before, {peak_mb()} MB after")


if __name__ == "__main__":
    main()
