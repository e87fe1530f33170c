"""UltraRAG's contract for a pipeline server, so its runner (`ultrarag build` / `ultrarag run`)
drives ours in place of its retriever:

- `build(parameter_file)` writes `server.yaml` beside the parameter file: `path` (the launcher
  UltraRAG starts as `python <path>`), `parameter`, and per tool its `input` (argument ->
  `$key` of the parameter file, or a pipeline variable) and `output` (reply keys kept as
  pipeline variables; every one must be in each reply's JSON text). Both come from the registry
  (api/registry.py): UltraRAG's own tools keep its declared inputs, ours take their required
  arguments and the optional ones the parameter file sets.
- the tools take the arguments UltraRAG passes, with its meanings: paths relative to the working
  directory, `collection_name` used only by Milvus, keys and URLs from its parameter file.

This is the operator's opt-in (`retriever serve --ultrarag`, which the launcher runs): see
`ultrarag_overrides` for what it changes. The launcher itself is pipeline/ultrarag.py's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import ConfigError, InvalidInputError
from .models import Request

if TYPE_CHECKING:
    from .tool import Tool

VARIABLE = {"query_list": "q_ls"}  # an argument's pipeline variable, UltraRAG's convention
MARK = "# server.yaml written by mcp-retriever's build; UltraRAG reads it.\n"


def _entry(inputs: list[str], outputs: tuple[str, ...], params: dict[str, Any]) -> dict[str, Any]:
    """One tool's server.yaml entry: an argument named in the parameter file reads it ($key); any
    other is a pipeline variable."""
    entry: dict[str, Any] = {"input": {}}
    for name in inputs:
        argument = "query_list" if name == "q_ls" else name
        entry["input"][argument] = f"${name}" if name in params else name
    if outputs:
        entry["output"] = [f"${o}" if o in params else o for o in outputs]
    return entry


def _inputs(tool: Tool, params: dict[str, Any]) -> list[str]:
    """UltraRAG's declared inputs for its tools; for ours the required arguments and the optional
    ones the parameter file sets."""
    if tool.ultrarag_inputs is not None:
        return [n for n in tool.ultrarag_inputs.split(",") if n]
    model: type[Request] = tool.request
    return [VARIABLE.get(n, n) for n, f in model.model_fields.items() if f.is_required() or n in params]


def server_io(tools: Iterable[Tool], params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each tool's inputs and outputs (server.yaml's `tools`), given the parameter file's keys."""
    return {t.name: _entry(_inputs(t, params), t.outputs, params) for t in tools if t.name != "build"}


def server_yaml(parameter_file: Path, tools: Iterable[Tool]) -> dict[str, Any]:
    """UltraRAG's server.yaml for `tools`, beside `parameter_file`."""
    params = yaml.safe_load(parameter_file.read_text(encoding="utf-8")) if parameter_file.is_file() else {}
    params = params or {}
    folder = parameter_file.parent
    launcher = Path(params.get("path") or folder / "src" / f"{folder.name}.py")
    if not launcher.is_file():
        raise ConfigError(f"build: the server's launcher {launcher.name} does not exist; create it with "
                          "`retriever ultrarag-server <folder>`")
    return {"path": str(launcher), "parameter": str(parameter_file), "tools": server_io(tools, params), "prompts": {}}


def write_server_yaml(parameter_file: Path, tools: Iterable[Tool]) -> Path:
    """server.yaml beside the parameter file; one this program did not write is never replaced."""
    out = parameter_file.parent / "server.yaml"
    if out.exists() and not out.read_text(encoding="utf-8", errors="replace").startswith(MARK):
        raise InvalidInputError("build: a server.yaml that mcp-retriever did not write is already there; it is "
                                "left as it is (remove it by hand to let build write one)")
    text = MARK + yaml.safe_dump(server_yaml(parameter_file, tools), allow_unicode=True, sort_keys=False)
    from ..store.persist import atomic_write_text

    atomic_write_text(out, text)
    return out


def ultrarag_overrides(cwd: Path, index_backend: str, allowed_paths: list[Path]) -> dict[str, Any]:
    """What `serve --ultrarag` changes: UltraRAG passes paths (relative to its working directory,
    which is therefore an allowed root), keys and URLs from its parameter file as arguments; its
    runner reads whole replies; its `collection_name` names a Milvus collection only; its chunked
    corpora repeat ids (numbered here: X, X#1, ...)."""
    roots = [str(p) for p in allowed_paths] + [str(cwd)]
    out: dict[str, Any] = {"security": {"client_endpoints": True, "allowed_paths": roots},
                           "reply": {"max_bytes": 0}, "duplicate_ids": "number"}
    if index_backend != "milvus":
        out["collection_name"] = ""
    return out


def adapt(request: Request, index_backend: str) -> Request:
    """A tool call read with UltraRAG's meanings: `collection_name` is dropped unless Milvus."""
    if index_backend != "milvus" and getattr(request, "collection_name", None) is not None:
        return request.model_copy(update={"collection_name": None})
    return request
