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
`import retriever` installs the finder, so every import of the library in the process, ours or
another's, gets it; one imported before that comes as it was.

Leaving out `openvino.tools.ovc` also leaves out OpenVINO's telemetry, which only that package
starts (it forked a process from a thread at `import openvino`: mcp/stdio.py still guards against
such forks)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Any

LEFT_OUT = {"bm25s": ("scipy", "numba"), "openvino": ("openvino.tools.ovc",)}


class _LeftOut(importlib.abc.MetaPathFinder):
    """Finds the libraries of LEFT_OUT with a loader that runs them with their modules refused;
    refuses, in the thread running such a library, the modules (and submodules) being left out."""

    def __init__(self) -> None:
        self._by_thread: dict[int, tuple[str, ...]] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        for left in self._by_thread.get(threading.get_ident(), ()):
            if name == left or name.startswith(left + "."):
                raise ModuleNotFoundError(f"{name} is left out of this import (retriever.imports)", name=name)
        if name not in LEFT_OUT:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Without(spec.loader, LEFT_OUT[name], self)
        return spec

    def running(self, loader: Any, module: ModuleType, left: tuple[str, ...]) -> None:
        me = threading.get_ident()
        before = self._by_thread.get(me, ())
        self._by_thread[me] = before + left
        try:
            loader.exec_module(module)
        finally:
            if before:
                self._by_thread[me] = before
            else:
                del self._by_thread[me]


class _Without(importlib.abc.Loader):
    """The library's own loader, its module body run with `left` refused (everything else passed on)."""

    def __init__(self, loader: Any, left: tuple[str, ...], finder: _LeftOut) -> None:
        self._loader, self._left, self._finder = loader, left, finder

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._finder.running(self._loader, module, self._left)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


_finder = _LeftOut()
sys.meta_path.insert(0, _finder)


__all__ = ["LEFT_OUT"]
