"""retriever.imports: a library imported without the optional modules it would import eagerly,
refused for the importing thread only, and importable as usual afterwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from retriever.testing.projects import ROOT

# A library that imports an optional module eagerly, then has another thread import it.
LIBRARY = '''
import threading
try:
    import optional_part
    HAVE_OPTIONAL = True
except ImportError:
    HAVE_OPTIONAL = False
seen = {}
def other():
    try:
        import optional_part
        seen["other thread"] = "imported"
    except ImportError:
        seen["other thread"] = "refused"
thread = threading.Thread(target=other)
thread.start()
thread.join()
'''

CHECK = '''
import sys
from retriever import imports
imports.LEFT_OUT["a_library"] = ("optional_part",)
import a_library as lib
print(lib.HAVE_OPTIONAL, lib.seen["other thread"], "optional_part" in sys.modules)
import optional_part
import a_library
print(a_library is lib)
'''


def test_left_out_for_the_importing_thread_only(tmp_path: Path) -> None:
    (tmp_path / "a_library.py").write_text(LIBRARY)
    (tmp_path / "optional_part.py").write_text("")
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={"PYTHONPATH": f"{tmp_path}:{ROOT / 'servers'}"}).stdout.split("\n")
    # the library found it missing; the other thread imported it (so it is in sys.modules after);
    # imported afterwards as usual; a second import returns the same module
    assert out[:2] == ["False imported True", "True"]


def test_bm25s_and_openvino_without_scipy_numba_or_the_converter() -> None:
    """bm25s builds and searches on numpy without scipy or numba; OpenVINO runs without ovc."""
    script = '''
import sys
import retriever
import bm25s, openvino as ov
retriever = bm25s.BM25()
retriever.index(bm25s.tokenize(["a cat sat", "a dog ran", "cats and dogs"], show_progress=False), show_progress=False)
docs, _ = retriever.retrieve(bm25s.tokenize(["cat"], show_progress=False), k=1, show_progress=False)
print(int(docs[0][0]), [m for m in ("scipy", "numba", "openvino.tools.ovc") if m in sys.modules], ov.Core() is not None)
import scipy.sparse, openvino.tools.ovc
'''
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "servers")}).stdout.strip()
    assert out == "0 [] True"


HALFWAY = """
import sys, threading, time
import importlib, retriever
imports_it = lambda: importlib.import_module("slow_library")
threading.Thread(target=imports_it).start()
while "slow_library" not in sys.modules:  # the other thread is running its module body
    time.sleep(0.001)
import slow_library
print(slow_library.DONE)
"""


def test_a_library_another_thread_is_importing_is_returned_whole(tmp_path: Path) -> None:
    """A second import waits for an import under way in another thread, as `import` does, instead of
    returning the half-run module."""
    (tmp_path / "slow_library.py").write_text("import time\ntime.sleep(0.5)\nDONE = 'whole'\n")
    out = subprocess.run([sys.executable, "-c", HALFWAY], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": f"{tmp_path}:{ROOT / 'servers'}"})
    assert out.stdout.strip() == "whole", out.stderr[-2000:]
