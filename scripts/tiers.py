"""Which tests leave `make test-fast` (marked slow by tests/conftest.py): those whose setup, call
and teardown together took at least THRESHOLD seconds in a `--durations=0` run of the fast tier.
Writes tests/slow_tests.txt (one `file::function` a line, all its parameters together).

    .venv/bin/python -m pytest -q -m "not slow and not milvus_server" --durations=0 > durations.log
    .venv/bin/python scripts/tiers.py durations.log [--threshold 1.2]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "slow_tests.txt"
LINE = re.compile(r"([\d.]+)s (?:setup|call|teardown)\s+(\S+)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", type=Path)
    p.add_argument("--threshold", type=float, default=1.2)
    args = p.parse_args()
    seconds: Counter[str] = Counter()
    for line in args.log.read_text().splitlines():
        if m := LINE.match(line):
            seconds[m.group(2).split("[")[0]] += float(m.group(1))
    keep = set(OUT.read_text().split()) if OUT.is_file() else set()  # measured slow before: stays slow
    slow = sorted(keep | {t for t, s in seconds.items() if s >= args.threshold})
    OUT.write_text("".join(f"{t}\n" for t in slow))
    print(f"{len(slow)} tests in {OUT.name}; the fast tier keeps {len(set(seconds) - set(slow))}")


if __name__ == "__main__":
    main()
