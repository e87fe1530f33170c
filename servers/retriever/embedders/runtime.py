"""Which runtime and precision the local backend runs: `choose(...)` -> `Choice`, with the reason.

`runtime: auto` picks by evidence (bench/RESULTS.md, "Embedding runtimes"): the fastest variant
whose SciFact dense nDCG@10 is within 0.005 of torch fp32 and whose vectors keep a cosine of at
least 0.99 to it. That is OpenVINO bf16 on a CPU that computes bfloat16 in hardware (AMX or
AVX512-BF16), onnxruntime int8 on one with VNNI only (torch fp32 there without onnxruntime), and
OpenVINO fp32 elsewhere and wherever fp32 is asked: torch fp32's vectors (min cosine 1.00000 over
SciFact) at 1.91x plain encode against torch's 0.96x with AVX-512, and on a CPU with AVX2 only
1.01x against 1.00x, a query in 14.8 against 29.0 ms and a start in 1.6 against 9.7 s. torch fp32
where openvino is not installed, for a model that is not a local folder, and on a GPU (and where
q_task / psg_task are set: embedders.local_choice). Where torch is not installed (a
lean install serving a prepared export, the container image), `auto` picks the fastest exported
runtime that is installed, fp32 where the CPU has no native bf16 or int8, and says so.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import ConfigError, MissingDependencyError

log = logging.getLogger(__name__)

OFFERED: dict[str, tuple[str, ...]] = {
    "torch": ("fp32", "bf16"),
    "onnx": ("fp32", "int8"),
    "openvino": ("fp32", "bf16"),
    "static": ("fp32",),
}
# what each runtime imports to serve (its extra is named after it). Making the export once needs
# torch and onnx beside them (exported.py), distilling the static model skeletoken (static.py).
MODULES = {"torch": ("torch", "sentence_transformers"), "onnx": ("onnxruntime",), "openvino": ("openvino",),
           "static": ("model2vec",)}


@dataclass(frozen=True)
class Choice:
    runtime: str  # torch | onnx | openvino | static
    precision: str  # fp32 | bf16 | int8
    reason: str  # why this one: shown by retriever_init and logged

    @property
    def label(self) -> str:
        return f"{self.runtime} {self.precision}"


@cache
def cpu_flags() -> frozenset[str]:
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return frozenset()


def bf16_flag(flags: frozenset[str]) -> str | None:
    """The CPU flag that makes bfloat16 native (AMX or AVX512-BF16), or None: emulated there."""
    return next((f for f in ("amx_bf16", "avx512_bf16") if f in flags), None)


def vnni_flag(flags: frozenset[str]) -> str | None:
    return next((f for f in ("amx_int8", "avx512_vnni", "avx_vnni") if f in flags), None)


def missing_modules(runtime: str) -> list[str]:
    return missing(*MODULES.get(runtime, ()))


def missing(*modules: str) -> list[str]:
    return [m for m in modules if not _importable(m)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules
        return False


def extra(runtime: str) -> str:
    return f"mcp-retriever[{runtime}]"


def install_hint(runtime: str) -> str:
    return f"pip install '{extra(runtime)}'"


def choose(runtime: str, precision: str, device: str, local_model: bool,
           flags: frozenset[str] | None = None) -> Choice:
    """The runtime and precision to run, from the YAML's `runtime` and `precision` (either may be
    `auto`), the device, whether the model is a local folder, and the CPU's flags."""
    flags = cpu_flags() if flags is None else flags
    if runtime != "auto":
        p = precision if precision != "auto" else "fp32"
        if runtime == "openvino" and precision == "auto" and bf16_flag(flags):
            p = "bf16"
        if p not in OFFERED[runtime]:
            raise ConfigError(f"backend_configs.sentence_transformers: runtime {runtime!r} offers precision "
                              f"{' | '.join(OFFERED[runtime])}, not {p!r}")
        if runtime != "torch" and device != "cpu":
            raise ConfigError(f"runtime {runtime!r} runs on the CPU; remove gpu_ids or set runtime: torch")
        if runtime != "torch" and not local_model:
            raise ConfigError(f"runtime {runtime!r} exports the model from a local folder; set model_name_or_path "
                              "to one, or runtime: torch")
        if absent := missing_modules(runtime):
            raise MissingDependencyError(absent[0], extra(runtime))
        return Choice(runtime, p, "set in parameter.yaml")
    return _auto(precision, device, local_model, flags)


def _auto(precision: str, device: str, local_model: bool, flags: frozenset[str]) -> Choice:
    torch_precision = "bf16" if precision == "bf16" else "fp32"
    if device != "cpu":
        return Choice("torch", torch_precision, f"device {device}: torch")
    if local_model and missing_modules("torch"):
        return _without_torch(precision, flags)
    if not local_model:
        return Choice("torch", torch_precision, "the model is not a local folder, so no exported runtime: torch")
    if precision == "fp32":
        return _fp32("precision fp32 asked")
    bf16 = bf16_flag(flags)
    if precision in ("auto", "bf16") and bf16:
        if not missing_modules("openvino"):
            return Choice("openvino", "bf16", f"CPU has {bf16}: OpenVINO bf16 is the fastest variant within the "
                                              "quality bounds (bench/RESULTS.md)")
        why = f"CPU has {bf16} but openvino is not installed ({install_hint('openvino')}, faster)"
        return Choice("torch", torch_precision, f"{why}: torch {torch_precision}")
    if precision == "bf16":
        return Choice("torch", "bf16", "precision bf16 asked; this CPU has no AMX or AVX512-BF16, so it runs "
                                       "emulated, slower than fp32")
    vnni = vnni_flag(flags)
    if precision == "int8" or vnni:
        if not missing_modules("onnx"):
            why = "precision int8 asked" if precision == "int8" else f"CPU has {vnni}"
            return Choice("onnx", "int8", f"{why}: onnxruntime int8 (first layer kept in fp32)")
        if precision == "int8":
            raise MissingDependencyError(missing_modules("onnx")[0], extra("onnx"))
        return Choice("torch", "fp32", f"CPU has {vnni} but onnxruntime is not installed ({install_hint('onnx')}): "
                                       "torch fp32")
    return _fp32("no AMX, AVX512-BF16 or VNNI on this CPU")


def _fp32(why: str) -> Choice:
    """fp32 beside torch: OpenVINO's run of the export (torch fp32's vectors, at least as fast on
    both CPUs measured and starting without torch), else torch itself."""
    if not missing_modules("openvino"):
        return Choice("openvino", "fp32", f"{why}: OpenVINO fp32, torch fp32's vectors and at least as fast "
                                          "(bench/RESULTS.md)")
    return Choice("torch", "fp32", f"{why}; openvino is not installed ({install_hint('openvino')}, faster): "
                                   "torch fp32")


def _without_torch(precision: str, flags: frozenset[str]) -> Choice:
    """torch is not installed: the fastest exported runtime that is, at the precision the CPU runs
    natively (fp32, within 1e-5 cosine of torch fp32, where it has no native bf16 or int8)."""
    lean = "torch is not installed"
    bf16, vnni = bf16_flag(flags), vnni_flag(flags)
    onnx, openvino = not missing_modules("onnx"), not missing_modules("openvino")
    if onnx and precision == "int8":
        return Choice("onnx", "int8", f"{lean}; precision int8 asked: onnxruntime int8")
    if openvino:
        if bf16 and precision in ("auto", "bf16"):
            return Choice("openvino", "bf16", f"{lean}; CPU has {bf16}: OpenVINO bf16")
        why = "precision fp32 asked" if precision == "fp32" else "no AMX or AVX512-BF16 on this CPU"
        return Choice("openvino", "fp32", f"{lean}; {why}: OpenVINO fp32")
    if onnx:
        if vnni and precision == "auto":
            return Choice("onnx", "int8", f"{lean}; CPU has {vnni}: onnxruntime int8")
        return Choice("onnx", "fp32", f"{lean}: onnxruntime fp32")
    raise MissingDependencyError("torch", extra("torch"))
