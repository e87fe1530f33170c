"""The model exported once to ONNX (torch.onnx, no optimum) and run on onnxruntime (fp32, or int8
with dynamic quantisation) or OpenVINO (fp32, or bf16 where the CPU computes it natively).

The whole sentence-transformers pipeline (transformer, pooling, normalisation) is one graph with
dynamic batch and sequence axes; tokenising uses the model's own tokenizer.json through `tokenizers`
(tokens.py). Texts are sorted by token count and padded per batch, so a batch wastes little on
padding. torch, sentence-transformers and onnx are needed only to make the export, once: serving a
cache that holds it imports none of them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import ConfigError, MissingDependencyError
from .cache import cached, model_folder
from .local import LocalEmbedder, check_length, folder_prompts
from .runtime import Choice, extra, missing
from .tokens import Tokens

log = logging.getLogger(__name__)
OPSET = 17
EXPORT_VERSION = 1  # bump when the exported graph changes shape


def export_folder(cfg: Config) -> Path:
    """The fp32 export's folder; the int8 graph's is beside it, named with `-int8`."""
    return model_folder(cfg.backend_configs.sentence_transformers.cache_dir, Path(cfg.resolved_model()),
                        f"onnx{EXPORT_VERSION}")


def _export(cfg: Config, out: Path) -> None:
    """model.onnx (fp32), the tokenizer and export.json into `out`."""
    import torch

    from .sentence_transformers import load_model, model_positions

    # The export is shared by every session of this model: it records the model's own sequence
    # length, not the max_seq_length of the session that happened to make it first.
    model = load_model(cfg.with_overrides({"backend_configs": {"sentence_transformers": {"max_seq_length": None}}},
                                          None)).eval()
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in model.tokenizer.model_input_names]

    class Pipeline(torch.nn.Module):  # keyword arguments: transformers 5 rejects them positionally
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

    sample = model.tokenizer(["a first sentence", "and a second, longer one"], padding=True, return_tensors="pt")
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {"sentence_embedding": {0: "batch"}}
    with torch.inference_mode(), warnings.catch_warnings():
        # The tracer warns of Python branches on shapes (padding, causal masks, pooling): with
        # an attention mask always given and as long as the tokens, each takes one side.
        # Every runtime's vectors are checked against torch's (tests/test_runtimes.py).
        warnings.simplefilter("ignore")
        torch.onnx.export(Pipeline(), tuple(sample[n] for n in names), str(out / "model.onnx"), input_names=names,
                          output_names=["sentence_embedding"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    model.tokenizer.save_pretrained(str(out))
    (out / "export.json").write_text(json.dumps({"inputs": names, "max_seq_length": model.max_seq_length,
                                                 "positions": model_positions(model), "opset": OPSET}))


def _quantize(fp32: Path, out: Path) -> None:
    """Dynamic int8, per channel; the first layer's matrix products stay fp32: over 1,000 SciFact
    passages that lifts the min cosine to fp32 from 0.990 to 0.993 for 5% of the speed-up."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32 / "model.onnx"))
    first = [n.name for n in graph.graph.node if n.op_type == "MatMul" and "layer.0/" in n.name]
    for f in fp32.iterdir():
        if f.is_file() and f.name not in {"model.onnx", ".complete"}:
            shutil.copy(f, out / f.name)
    quantize_dynamic(str(fp32 / "model.onnx"), str(out / "model.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True, nodes_to_exclude=first)


def _complete(folder: Path) -> bool:
    return (folder / ".complete").exists()


def exported(cfg: Config, precision: str = "fp32") -> Path:
    """The export folder of the YAML's model (int8: quantised from the fp32 one), made on first use."""
    fp32 = export_folder(cfg)
    int8 = fp32.with_name(f"{fp32.name}-int8")
    if _complete(int8 if precision == "int8" else fp32):
        return int8 if precision == "int8" else fp32  # made before: nothing below is imported
    # torch.onnx needs onnx (and torch); only the int8 quantiser needs onnxruntime
    if not _complete(fp32) and (absent := missing("torch", "sentence_transformers")):
        raise MissingDependencyError(absent[0], extra("torch"))  # a lean install without the export
    if absent := missing("onnx", *(["onnxruntime"] if precision == "int8" else [])):
        raise MissingDependencyError(absent[0], extra("onnx"))
    name = cfg.model_name_or_path or "MiniLM"
    try:
        cached(fp32, lambda tmp: _export(cfg, tmp), f"the ONNX export of {name}")
        if precision != "int8":
            return fp32
        return cached(int8, lambda tmp: _quantize(fp32, tmp), f"the int8 graph of {name}")
    except ImportError as e:
        raise MissingDependencyError(e.name or "onnx", extra("onnx")) from e
    except (ConfigError, MissingDependencyError):
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the exporter: name it, and the way out
        raise ConfigError(f"exporting {cfg.resolved_model()} to ONNX failed ({type(e).__name__}: {e}); "
                          "set backend_configs.sentence_transformers.runtime: torch") from e


def openvino_ir(fp32: Path, name: str) -> Path:
    """OpenVINO's own format of the export with fp16 weights, computed at the precision asked (bf16
    rounds them further anyway; fp32 keeps a min cosine of 0.999998 to torch fp32 over 200 SciFact
    passages): half the memory and disk of the ONNX graph, loaded without the ONNX reader. Made
    from the export by OpenVINO alone (no torch), once, beside it."""
    def make(tmp: Path) -> None:
        import openvino as ov

        ov.save_model(ov.Core().read_model(str(fp32 / "model.onnx")), str(tmp / "model.xml"), compress_to_fp16=True)

    return cached(fp32.with_name(f"{fp32.name}-ov16"), make, f"OpenVINO's fp16 graph of {name}")


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class OnnxSession:
    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = _threads()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._session.run(None, feeds)[0])


class OpenVinoSession:
    def __init__(self, path: Path, precision: str, cache: Path) -> None:
        import openvino as ov

        core = ov.Core()
        if os.access(cache if cache.exists() else cache.parent, os.W_OK):  # a read-only export compiles each start
            core.set_property({"CACHE_DIR": str(cache)})  # compiled blobs: later starts skip reading and compiling
        hint = {"bf16": "bf16", "fp32": "f32"}[precision]
        # by path, not a read model: with the cache, OpenVINO loads the compiled blob and never parses the graph
        self._compiled = core.compile_model(str(path), "CPU", {
            "INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"})
        self._request = self._compiled.create_infer_request()
        self._tensor = ov.Tensor
        # our arrays are int64 (ExportedEmbedder._feeds): shared as they are where the graph takes int64
        self._shared = all(port.get_element_type() == ov.Type.i64 for port in self._compiled.inputs)
        self._held: dict[str, np.ndarray] = {}

    def __call__(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        # Our arrays as the request's input tensors, without a copy, then `infer()` with no inputs:
        # `infer(feeds)` copies each array into the request's own tensor through OpenVINO's Python
        # dispatcher, reshaping it: a single query's run took 0.1 ms more that way here (1.50-1.53
        # against 1.40-1.42 ms, medians of 1,500 calls each, the order shuffled, bf16). The request
        # keeps pointing at the arrays until the next call sets its own: they are held till then.
        request = self._request
        if not self._shared:  # another input type: the dispatcher converts
            return np.array(request.infer(feeds)[0])
        self._held = feeds  # C-contiguous int64, as ExportedEmbedder._feeds makes them
        for name, array in feeds.items():
            request.set_tensor(name, self._tensor(array, shared_memory=True))
        request.infer()
        return np.array(request.get_output_tensor(0).data)  # a copy: the request reuses its buffer


# Tokens in one batch (rows x width): full batch_size for short texts, fewer rows for long ones.
# The runtime's working memory follows the largest batch shape: 8,056 chunks of 256 tokens ingested
# at 32 a batch peaked at 870 MB in 84.7 s, with this bound at 592 MB in 78.0 s (OpenVINO bf16 here;
# bench/ingest_memory.py --unbounded, then without).
BATCH_TOKENS = 2048


class ExportedEmbedder(LocalEmbedder):
    def __init__(self, cfg: Config, choice: Choice) -> None:
        super().__init__(cfg, choice)
        folder = exported(cfg, choice.precision)
        info = json.loads((folder / "export.json").read_text())
        self._inputs: list[str] = info["inputs"]
        self._max_len = check_length(cfg.backend_configs.sentence_transformers.max_seq_length or info["max_seq_length"],
                                     info.get("positions"))
        # OpenVINO keeps compiled kernels and buffers for every input shape it has seen, so widths
        # are rounded up: over 1,109 single SciFact queries its memory grew by 40 MB at multiples
        # of 8 tokens against 113 MB at exact widths (32 MB at 16), and a query took as long as at
        # its exact width (the same query at each width in turn, bf16; at 16 one took 0.2 ms more).
        # (onnxruntime int8 quantises activations per tensor, padding included: exact widths.)
        self._bucket = 8 if choice.runtime == "openvino" else 1
        try:
            self._tokenizer = Tokens(folder, self._max_len)
            if choice.runtime == "onnx":
                self._session: Any = OnnxSession(folder / "model.onnx")
            else:
                ir = openvino_ir(folder, cfg.model_name_or_path or "MiniLM")
                self._session = OpenVinoSession(ir / "model.xml", choice.precision, ir / "openvino-cache")
        except ImportError as e:
            raise MissingDependencyError(e.name or choice.runtime, extra(choice.runtime)) from e
        self.dimension = int(self._session(self._feeds(self._tokenizer([""]))).shape[1])
        self._ready(folder_prompts(Path(cfg.resolved_model())))

    def _feeds(self, rows: list[list[int]]) -> dict[str, np.ndarray]:
        width = max(len(r) for r in rows)
        if self._bucket > 1:  # masked padding: the same vectors, far fewer shapes
            width = min(-(-width // self._bucket) * self._bucket, max(self._max_len, width))
        ids = np.full((len(rows), width), self._tokenizer.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return {n: feeds[n] for n in self._inputs}

    def _run(self, texts: list[str], prompt: str | None, kind: str) -> np.ndarray:
        if prompt:
            texts = [prompt + t for t in texts]
        rows = self._tokenizer(texts)
        if len(rows) == 1:  # a query: one batch, nothing to order
            return np.asarray(self._session(self._feeds(rows)), dtype=np.float32)
        order = np.argsort([len(r) for r in rows], kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        start = 0
        while start < len(order):  # shortest first: a batch's width is its last row's
            end = start + 1
            while (end < len(order) and end - start < self._batch_size
                   and (end - start + 1) * len(rows[order[end]]) <= BATCH_TOKENS):
                end += 1
            batch = order[start:end]
            out[batch] = self._session(self._feeds([rows[i] for i in batch]))
            start = end
        return out
