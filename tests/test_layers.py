"""The house's layers are checked (import-linter's contracts in pyproject.toml, run by `make lint`):
each test plants one violation in a copy of the package and sees `lint-imports` refuse it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(tmp_path: Path, plant: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """lint-imports over a copy of servers/retriever with `plant` appended to the named modules."""
    src = tmp_path / "servers"
    shutil.copytree(ROOT / "servers" / "retriever", src / "retriever", ignore=shutil.ignore_patterns("__pycache__"))
    for module, line in plant.items():
        path = src / "retriever" / module
        path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"})


def test_the_package_keeps_its_contracts(tmp_path: Path) -> None:
    out = lint(tmp_path, {})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(("plant", "broken"), [
    pytest.param({"store/corpus.py": "from ..engine import retriever as _up"}, "layers", id="store-imports-engine"),
    pytest.param({"main.py": "from .testing import projects as _fake"}, "layers", id="main-imports-testing"),
    pytest.param({"mcp/tools.py": "from ..service import app as _face"}, "never import each other",
                 id="mcp-imports-service"),
    pytest.param({"cli.py": "from .pipeline import runner as _face"}, "never import each other", id="cli-imports-pipeline"),
    pytest.param({"store/corpus.py": "from ..documents import split as _a",
                  "documents/split.py": "from ..store import corpus as _b"}, "no import cycle", id="package-cycle"),
    pytest.param({"errors.py": "from . import types as _c", "types.py": "from . import errors as _d"},
                 "no import cycle", id="module-cycle"),
])
def test_a_planted_violation_fails_the_lint(tmp_path: Path, plant: dict[str, str], broken: str) -> None:
    out = lint(tmp_path, plant)
    assert out.returncode != 0
    report = out.stdout[out.stdout.index("Contracts"):]
    assert any(broken in line and "BROKEN" in line for line in report.splitlines()), report


# Imports every module of retriever.testing after `import retriever`; prints what it brought in.
TESTING_IMPORTS = """
import importlib, json, pkgutil, sys
import retriever
before = sorted(m for m in sys.modules if m.startswith("retriever.testing"))
import retriever.testing as package
for m in pkgutil.iter_modules(package.__path__):
    importlib.import_module("retriever.testing." + m.name)
print(json.dumps({"before": before, "top": sorted({m.split(".")[0] for m in sys.modules})}))
"""
HEAVY = {"torch", "transformers", "sentence_transformers", "fastmcp", "mcp", "pytest", "hypothesis", "pymilvus",
         "openai", "faiss", "bm25s", "PIL", "fpdf", "docx", "pptx", "openpyxl", "ebooklib", "scipy"}


def test_the_testing_package_is_light_and_apart() -> None:
    """`import retriever` loads nothing of retriever.testing, and its modules import no model, index,
    MCP, test or document library at import time (those load inside the functions that use them)."""
    out = subprocess.run([sys.executable, "-c", TESTING_IMPORTS], capture_output=True, text=True, check=True,
                         timeout=120, env={"PYTHONPATH": str(ROOT / "servers"), "PATH": "/usr/bin:/bin"})
    seen = json.loads(out.stdout)
    assert seen["before"] == []
    assert HEAVY.isdisjoint(seen["top"]), sorted(HEAVY & set(seen["top"]))
