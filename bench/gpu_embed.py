"""The torch runtime on a CUDA GPU (`gpu_ids`), through the product's own embedder: which device and
runtime `runtime: auto` picks there, the vectors against the same model's on this machine's CPU
(min cosine over SciFact passages and queries), and SciFact's 5,183 passages embedded per second
at fp32 and bf16. Needs a machine with a GPU; CI never runs it.

    # here (CPU): the reference vectors, from a model folder (e.g. the packaged MiniLM's files)
    .venv/bin/python bench/gpu_embed.py reference --model DIR --out REF.npz
    # on the GPU machine: the check, written as a markdown section
    python3 bench/gpu_embed.py check --model DIR --reference REF.npz --out GPU.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# the GPU machine runs this file with its own python3, where the package is not installed: its source, by path
sys.path.insert(0, str(ROOT / "servers"))

from report import SCIFACT  # noqa: E402
from retriever.config import load_config  # noqa: E402
from retriever.embedders import build_embedder  # noqa: E402


def texts(name: str, n: int | None = None) -> list[str]:
    """The first `n` texts of SciFact's corpus or queries (a passage: title and text)."""
    rows = [json.loads(line) for line in (SCIFACT / name).read_text().splitlines() if line.strip()]
    return [" ".join(p for p in (r.get("title"), r.get("text")) if p) for r in rows[:n]]


def embedder(model: str, gpu_ids: str | None, precision: str = "auto"):  # type: ignore[no-untyped-def]
    cfg = load_config(ROOT / "parameter.yaml", overrides={
        "model_name_or_path": model, "gpu_ids": gpu_ids,
        "backend_configs": {"sentence_transformers": {"runtime": "auto", "precision": precision}}})
    return build_embedder(cfg)


def sample() -> tuple[list[str], list[str]]:
    return texts("corpus.jsonl", 256), texts("queries.jsonl", 64)


def reference(args: argparse.Namespace) -> None:
    e = embedder(args.model, None, "fp32")
    some, queries = sample()
    np.savez(args.out, passages=e.encode_passages(some), queries=e.encode_queries(queries, ""),
             runtime=np.array(e.runtime))


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(axis=1).min())


def check(args: argparse.Namespace) -> None:
    import torch

    ref = np.load(args.reference)
    some, queries = sample()
    corpus = texts("corpus.jsonl")
    lines = [f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; the model `{args.model}` "
             f"(batch_size {load_config(ROOT / 'parameter.yaml').batch_size}); the reference vectors "
             f"`{args.reference}`, made on a CPU machine ({ref['runtime']}) by `bench/gpu_embed.py reference`.", "",
             "| precision asked | device | runtime and reason | min cosine to the CPU's, 256 passages | "
             "min cosine, 64 queries | SciFact passages/s (median of 3, 5,183 passages) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for precision in ("fp32", "bf16"):
        e = embedder(args.model, "0", precision)
        p, q = e.encode_passages(some), e.encode_queries(queries, "")
        rates = []
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            e.encode_passages(corpus)
            torch.cuda.synchronize()
            rates.append(len(corpus) / (time.perf_counter() - t))
        device = getattr(e, "device", "?")
        lines.append(f"| {precision} | {device} | {e.runtime}: {e.runtime_reason} | "
                     f"{min_cosine(p, ref['passages']):.6f} | {min_cosine(q, ref['queries']):.6f} | "
                     f"{statistics.median(rates):,.0f} |")
        if not str(device).startswith("cuda"):
            lines.append(f"\n**not on the GPU**: warnings {e.warnings}")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["reference", "check"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--reference")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.mode == "check" and not args.reference:
        parser.error("check needs --reference (the file `reference` wrote)")
    reference(args) if args.mode == "reference" else check(args)


if __name__ == "__main__":
    main()
