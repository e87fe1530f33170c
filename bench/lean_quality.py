"""SciFact nDCG@10 through the lean path, beside torch, in one run: does serving without torch
(the export's tokenizer through `tokenizers`, the graph on onnxruntime or OpenVINO) rank as the
torch runtime does? Writes the "lean path quality" section of bench/LEAN.md.

    .venv/bin/python bench/lean_quality.py [--lean-python .cache/lean-venv/bin/python]

Each runtime and precision gets its own indexes (bench/out/lean_quality/<runtime>-<precision>/,
made once by `retriever index` with this venv and reused), then `retriever eval` (dense and
hybrid, the YAML's fusion) runs from `--lean-python`'s venv for the exported runtimes (a venv
without torch: the eval cannot import it) and from this venv for torch. Also checked: the token
ids of every SciFact passage and query, from the lean path's tokenizer (embedders/tokens.py) and
from transformers' tokenizer (what the exported runtimes used before), at the model's 256.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from report import ROOT, SCIFACT, write_section
from startup import BIN, build, ndcg, server_venv

OUT = ROOT / "bench" / "out" / "lean_quality"
VARIANTS = [("torch", "fp32"), ("onnx", "fp32"), ("openvino", "fp32"), ("onnx", "int8"), ("openvino", "bf16")]


def tokens_agree() -> tuple[int, int]:
    """(texts whose ids agree, texts): every SciFact passage and query, lean tokenizer vs transformers."""
    from retriever.config import load_config
    from retriever.embedders.exported import exported
    from retriever.embedders.tokens import Tokens
    from transformers import AutoTokenizer

    folder = exported(load_config(ROOT / "parameter.yaml"))
    texts = [" ".join(p for p in (d.get("title"), d.get("text")) if p)
             for d in map(json.loads, (SCIFACT / "corpus.jsonl").read_text().splitlines())]
    texts += [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").read_text().splitlines()]
    lean = Tokens(folder, 256)
    want = AutoTokenizer.from_pretrained(str(folder))(texts, truncation=True, max_length=256)["input_ids"]
    got = lean(texts)
    one = [lean([t])[0] for t in texts[-300:]]  # one text at a time, as a single query is tokenized
    agree = sum(a == b for a, b in zip(got, want)) + sum(a == b for a, b in zip(one, want[-300:]))
    return agree, len(texts) + len(one)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lean-python", type=Path, help="evaluate the exported runtimes from this venv's python")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "LEAN.md")
    args = ap.parse_args()
    lean_bin = Path(os.path.abspath(args.lean_python)).parent if args.lean_python else BIN
    for rt, prec in VARIANTS:
        build(rt, prec, OUT / f"{rt}-{prec}")
    rows = []
    for rt, prec in VARIANTS:
        where = BIN if rt == "torch" else lean_bin
        scores = {mode: ndcg(rt, mode, prec, OUT / f"{rt}-{prec}", where) for mode in ("dense", "hybrid")}
        label = json.loads((OUT / f"{rt}-{prec}" / "faiss" / "manifest.json").read_text())["runtime"]
        rows.append(f"| {label} | {server_venv(where)} |"
                    f" {scores['dense']:.4f} | {scores['hybrid']:.4f} |")
        print(rows[-1], file=sys.stderr)
    agree, total = tokens_agree()
    body = "\n".join([
        f"## Lean path quality: SciFact nDCG@10 by runtime (`{' '.join(['bench/lean_quality.py', *sys.argv[1:]])}`,"
        f" {time.strftime('%Y-%m-%d')})",
        "",
        "SciFact (5,183 passages, 300 test queries), `retriever eval` with each runtime's own indexes (dense: FAISS"
        " exact inner product; hybrid: the YAML's fusion).",
        "",
        "| runtime | eval run from | dense nDCG@10 | hybrid nDCG@10 |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        f"Token ids, the lean path's tokenizer (`tokenizers` on the export's tokenizer.json) against transformers'"
        f" tokenizer, every SciFact passage and query at 256 tokens (and the last 300 one text at a time, as a"
        f" single query is tokenized): **{agree} of {total} identical**.",
    ])
    write_section("lean path quality", body, args.out)
    print(body)


if __name__ == "__main__":
    main()
