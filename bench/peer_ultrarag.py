"""UltraRAG's `build_text_corpus` (its corpus server's tool) over a folder, timed: the parse stage of
bench/sync_bench.py's peer. Run with UltraRAG's venv (scripts/ultrarag_venv.sh), which holds its
corpus server's source under .cache/ultrarag-src/servers/corpus:

    .cache/ultrarag-venv/bin/python bench/peer_ultrarag.py DOCS OUT.jsonl

Prints one JSON line: files, records, seconds. UltraRAG reads .txt, .md, .pdf, .xps, .oxps, .epub,
.mobi, .fb2, .docx, .doc and .wps, and names every other file unsupported; a record's id is the
file's stem (two README.md files share one).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    docs, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    sys.path.insert(0, str(ROOT / ".cache" / "ultrarag-src" / "servers" / "corpus" / "src"))
    os.chdir(out.parent)  # UltraRAG writes its logs/ under the working folder
    import corpus  # UltraRAG's corpus server

    build = getattr(corpus.build_text_corpus, "fn", corpus.build_text_corpus)
    files = sum(1 for p in docs.rglob("*") if p.is_file())
    t = time.perf_counter()
    asyncio.run(build(str(docs), str(out)))
    seconds = time.perf_counter() - t
    records = sum(1 for line in out.open(encoding="utf-8") if line.strip())
    ids = [json.loads(line)["id"] for line in out.open(encoding="utf-8") if line.strip()]
    print(json.dumps({"files": files, "records": records, "distinct_ids": len(set(ids)), "seconds": seconds}))


if __name__ == "__main__":
    main()
