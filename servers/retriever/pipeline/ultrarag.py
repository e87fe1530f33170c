"""UltraRAG's contract for a pipeline server, so its runner (`ultrarag build` / `ultrarag run`)
drives ours in place of its retriever:

- `build(parameter_file)` writes `server.yaml` beside the parameter file: `path` (the launcher
  UltraRAG starts as `python <path>`), `parameter`, and per tool its `input` (argument ->
  `$key` of the parameter file, or a pipeline variable) and `output` (reply keys kept as
  pipeline variables; every one must be in each reply's JSON text).
- the tools take the arguments UltraRAG passes, with its meanings: paths relative to the working
  directory, `collection_name` used only by Milvus, keys and URLs from its parameter file.

This is the operator's opt-in (`retriever serve --ultrarag`, which the launcher runs): see
`ultrarag_overrides` for what it changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..api.models import Request
from ..errors import ConfigError

# UltraRAG's retriever tools and their I/O, as its server declares them ("arguments->outputs";
# q_ls is the pipeline variable of the argument query_list). Ours adds ids and scores.
ULTRARAG_IO = {
    "retriever_init": "model_name_or_path,backend_configs,batch_size,corpus_path,gpu_ids,is_multimodal,backend,"
                      "index_backend,index_backend_configs,is_demo,collection_name->None",
    "retriever_embed": "embedding_path,overwrite,is_multimodal->None",
    "retriever_index": "embedding_path,overwrite,collection_name,corpus_path->None",
    "retriever_search": "q_ls,top_k,query_instruction,collection_name->ret_psg,ret_ids,ret_scores",
    "retriever_batch_search": "batch_query_list,top_k,query_instruction,collection_name->ret_psg_ls,ret_ids_ls,"
                              "ret_scores_ls",
    "retriever_project_memory_search": "q_ls,top_k,query_instruction,current_user_id->project_memory_content",
    "bm25_index": "overwrite->None",
    "bm25_search": "q_ls,top_k->ret_psg,ret_ids,ret_scores",
    "retriever_deploy_search": "retriever_url,q_ls,top_k,query_instruction->ret_psg",
    "retriever_websearch": "q_ls,top_k,retrieve_thread_num,websearch_backend,websearch_backend_configs->ret_psg",
    "retriever_batch_websearch": "batch_query_list,top_k,retrieve_thread_num,websearch_backend,"
                                 "websearch_backend_configs->ret_psg_ls",
}
# Our tools beyond UltraRAG's: the outputs every reply has.
EXTRA_OUTPUTS = {
    "retriever_hybrid_search": "ret_psg,ret_ids,ret_scores,ret_sources",
    "retriever_hybrid_batch_search": "ret_psg_ls,ret_ids_ls,ret_scores_ls,ret_sources_ls",
    "retriever_multi_query_search": "ret_psg,ret_ids,ret_scores,ret_sources",
    "retriever_fanout_search": "ret_psg,ret_ids,ret_scores,ret_collections,errors",
    "retriever_add": "None",
    "retriever_delete": "None",
    "retriever_list_collections": "collections",
    "retriever_build_image_corpus": "None",
    "retriever_rewrite_query": "queries",
    "retriever_agentic_search": "ret_psg,ret_ids,ret_scores,rounds",
    "retriever_extract_triples": "None",
    "retriever_graph_search": "ret_psg,ret_ids,ret_scores",
    "retriever_infer_filters": "filters",
}
VARIABLE = {"query_list": "q_ls"}  # an argument's pipeline variable, UltraRAG's convention


def _entry(spec: str, params: dict[str, Any]) -> dict[str, Any]:
    """One tool's server.yaml entry from "arguments->outputs": an argument named in the
    parameter file reads it ($key); any other is a pipeline variable."""
    inputs, _, outputs = spec.rpartition("->")
    entry: dict[str, Any] = {"input": {}}
    for name in filter(None, inputs.split(",")):
        argument = "query_list" if name == "q_ls" else name
        entry["input"][argument] = f"${name}" if name in params else name
    if outputs.strip().lower() != "none":
        entry["output"] = [f"${o}" if o in params else o for o in outputs.split(",")]
    return entry


def _extra_spec(model: type[Request], outputs: str, params: dict[str, Any]) -> str:
    """Our tool's arguments: the required ones, and the optional ones the parameter file sets."""
    names = [VARIABLE.get(n, n) for n, f in model.model_fields.items() if f.is_required() or n in params]
    return f"{','.join(names)}->{outputs}"


def server_yaml(parameter_file: Path, tools: dict[str, type[Request]]) -> dict[str, Any]:
    """UltraRAG's server.yaml for `tools` (name -> request model), beside `parameter_file`."""
    params = yaml.safe_load(parameter_file.read_text(encoding="utf-8")) if parameter_file.is_file() else {}
    params = params or {}
    folder = parameter_file.parent
    launcher = Path(params.get("path") or folder / "src" / f"{folder.name}.py")
    if not launcher.is_file():
        raise ConfigError(f"build: the server's launcher {launcher} does not exist; create it with "
                          f"`retriever ultrarag-server {folder}`")
    return {"path": str(launcher), "parameter": str(parameter_file), "tools": server_io(tools, params), "prompts": {}}


def server_io(tools: dict[str, type[Request]], params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each tool's inputs and outputs (server.yaml's `tools`), given the parameter file's keys."""
    entries = {name: _entry(spec, params) for name, spec in ULTRARAG_IO.items() if name in tools}
    entries |= {name: _entry(_extra_spec(tools[name], outputs, params), params)
                for name, outputs in EXTRA_OUTPUTS.items() if name in tools}
    return entries


def write_server_yaml(parameter_file: Path, tools: dict[str, type[Request]]) -> Path:
    out = parameter_file.parent / "server.yaml"
    out.write_text(yaml.safe_dump(server_yaml(parameter_file, tools), allow_unicode=True, sort_keys=False),
                   encoding="utf-8")
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


LAUNCHER = '''"""UltraRAG starts this server as `python {name}`: run mcp-retriever's retriever over stdio
in UltraRAG mode, with the Python that has it installed."""
import os
import sys

PYTHON = {python!r}
PARAMETERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "parameter.yaml")
os.execv(PYTHON, [PYTHON, "-m", "retriever", "serve", "--ultrarag", "--config", os.path.normpath(PARAMETERS),
                  *sys.argv[1:]])
'''


def write_launcher(folder: Path, python: str) -> Path:
    path = folder / "src" / f"{folder.name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LAUNCHER.format(name=path.name, python=python), encoding="utf-8")
    return path
