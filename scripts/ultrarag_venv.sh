#!/usr/bin/env bash
# UltraRAG's pipeline runner in a virtual environment of its own (it pins fastmcp >=3.3.1,<3.4.5),
# for tests/test_ultrarag_runner.py. UltraRAG is not on PyPI (the `ultrarag` there is another
# project): give a checkout of github.com/OpenBMB/UltraRAG.
#   scripts/ultrarag_venv.sh /path/to/UltraRAG
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(cd "${1:?usage: scripts/ultrarag_venv.sh /path/to/UltraRAG}" && pwd)
mkdir -p .cache
rm -rf .cache/ultrarag-src
mkdir -p .cache/ultrarag-src
cp -r "$SRC/src" "$SRC/pyproject.toml" "$SRC/README.md" "$SRC/data" .cache/ultrarag-src/
mkdir -p .cache/ultrarag-src/servers .cache/ultrarag-src/examples
cp -r "$SRC/servers/benchmark" "$SRC/servers/retriever" "$SRC/servers/corpus" .cache/ultrarag-src/servers/  # its retriever: the drop-in; corpus: bench/sync_bench.py
cp -r "$SRC/examples/experiments" .cache/ultrarag-src/examples/
test -x .cache/ultrarag-venv/bin/python || python3 -m venv .cache/ultrarag-venv
.cache/ultrarag-venv/bin/pip install --quiet ./.cache/ultrarag-src
