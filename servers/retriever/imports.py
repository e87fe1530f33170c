"""Importing a library without the optional modules it imports eagerly but our use of it never
touches: each costs the start-up of every process that loads an index or a model.

- bm25s imports scipy (for `csc_backend="scipy"`) and numba (for `backend="numba"`) when they
  are installed; we build and search with its defaults, numpy for both. scipy.sparse alone took
  about a tenth of a second of a 1.5 s `serve --init` (python -X importtime).
- OpenVINO imports its model converter (`openvino.tools.ovc`, for `convert_model`) at
  `import openvino`: about as long again. The export is read with `Core.read_model` instead.

The modules are left out for the importing thread only: while it imports the library, a finder
refuses them to any import in that thread (the library's own, or one of a package it pulls in),
so another thread importing one of them meanwhile is unaffected; afterwards they import as usual.
A library already imported is returned as it is.

Leaving out `openvino.tools.ovc` also leaves out OpenVINO's telemetry, which only that package
starts (it forked a process from a thread at `import openvino`: mcp/stdio.py still guards against
such forks)."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
from types import ModuleType
from typing import Any

LEFT_OUT = {"bm25s": ("scipy", "numba"), "openvino": ("openvino.tools.ovc",)}


class _LeftOut(importlib.abc.MetaPathFinder):
    """Refuses, in the thread that set them, the modules (and their submodules) being left out."""

    def __init__(self) -> None:
        self._by_thread: dict[int, tuple[str, ...]] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        for left in self._by_thread.get(threading.get_ident(), ()):
            if name == left or name.startswith(left + "."):
                raise ModuleNotFoundError(f"{name} is left out of this import (retriever.imports)", name=name)
        return None

    def importing(self, name: str) -> ModuleType:
        me = threading.get_ident()
        before = self._by_thread.get(me, ())
        self._by_thread[me] = before + LEFT_OUT.get(name, ())
        try:
            return importlib.import_module(name)
        finally:
            if before:
                self._by_thread[me] = before
            else:
                del self._by_thread[me]


_finder = _LeftOut()
sys.meta_path.insert(0, _finder)


def lean_import(name: str) -> ModuleType:
    """`import name` (bm25s, openvino) without the modules LEFT_OUT names for it. Imported already
    (or being imported by another thread: import_module waits for it), it is returned as it is."""
    return importlib.import_module(name) if name in sys.modules else _finder.importing(name)


__all__ = ["LEFT_OUT", "lean_import"]
