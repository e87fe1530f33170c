"""What a client may ask for: paths inside the operator's roots, no endpoints or keys of its own,
and no settings other than the operator's over HTTP unless the YAML allows it. Where the operator
lets calls name endpoints (security.client_endpoints), a key from the YAML or the environment still
goes only to the URL from the same place: a URL from a call gets only a key from that call, or none.

The operator (parameter.yaml, `--set` on the command line) is trusted; a tool call is not. A
value a call passes that equals the operator's is no change and always allowed, so a pipeline
that repeats its YAML's settings in `retriever_init` keeps working.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ..config import MINILM_ALIASES, Config
from ..errors import ForbiddenError
from .redaction import paths_out

log = logging.getLogger(__name__)
# Set by the layers that serve clients (the MCP tools) for the duration of a call: the checks
# below apply to it. The Python API and the command line are the operator's, and trusted.
FROM_CLIENT: ContextVar[bool] = ContextVar("retriever_from_client", default=False)

# Where requests go -> the credential sent with them (dotted keys of Config). retriever_url and
# its remote.token: search/deployed.py (retriever_deploy_search reads the operator's config only).
KEYED_URLS = {
    "backend_configs.openai.base_url": "backend_configs.openai.api_key",
    "backend_configs.infinity.url": "backend_configs.infinity.api_key",
    "llm.base_url": "llm.api_key",
    **{f"websearch_backend_configs.{p}.base_url": f"websearch_backend_configs.{p}.api_key"
       for p in ("exa", "tavily", "zhipuai")},
}
MILVUS_TOKEN_ENV = "MILVUS_TOKEN"  # what indexes/milvus/index.py falls back to
# The models and servers of the rerank stage and the sparse retriever (config/ranking.py): the YAML's only.
OPERATOR_ONLY = ("rerank.model_name_or_path", "rerank.url", "rerank.api_key", "sparse.model_name_or_path")
REMOTE_CODE = ("backend_configs.sentence_transformers.trust_remote_code", "backend_configs.infinity.trust_remote_code")

def changed_keys(base: Config, cfg: Config) -> list[str]:
    """Dotted keys whose value in `cfg` differs from the operator's `base`."""
    return sorted(_diff(base.model_dump(), cfg.model_dump(), ""))


def _diff(a: Any, b: Any, prefix: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            yield from _diff(a.get(key), b.get(key), f"{prefix}{key}.")
    elif a != b:
        yield prefix.rstrip(".")


def allowed_roots(base: Config, base_dir: Path | None) -> list[Path]:
    """The folders a client's paths may resolve into: the YAML's folder, the index folders it
    configures, and `security.allowed_paths`."""
    roots = [*base.index_folders(), *base.security.allowed_paths]
    if base_dir is not None:
        roots.append(base_dir)
    return [r.resolve() for r in roots]


def inside(path: Path, roots: list[Path]) -> bool:
    real = path.resolve()  # follows symlinks: a link inside a root to a place outside is outside
    return any(real == r or real.is_relative_to(r) for r in roots)


def check_path(path: Path, base: Config, base_dir: Path | None, what: str) -> Path:
    """`path`, if a client's call may use it (the operator's calls may use any)."""
    if FROM_CLIENT.get():
        _check_inside(path, allowed_roots(base, base_dir), what)
    return path


def check_replace(files: Iterable[Path], ours: bool, what: str) -> None:
    """A client's write replaces only files this program wrote: refused, with or without
    overwrite, where one of `files` (what the write would put or replace) exists and `ours` (the
    record this program keeps beside them, persist.written_here) is false. The operator's may."""
    if not FROM_CLIENT.get() or ours:
        return
    taken = next((f for f in files if f.exists()), None)
    if taken is not None:
        raise ForbiddenError(f"{what}: {taken.name} exists and this server did not write it; a tool call never "
                             "replaces such a file, with or without overwrite (choose another path, or the operator "
                             "removes it)")


def for_client(text: str, cfg: Config, base_dir: Path | None) -> str:
    """A message for a remote client: the server's folders (the YAML's, the roots, the corpus's)
    out of it, a path under the YAML's folder relative to it (redaction.paths_out)."""
    folders = allowed_roots(cfg, base_dir)
    if cfg.corpus_path is not None:
        folders.append(cfg.corpus_path.parent)
    return paths_out(text, base_dir, folders)


def _check_inside(path: Path, roots: list[Path], what: str) -> None:
    if not inside(path, roots):  # the key and the file's name: its folder may be the server's
        raise ForbiddenError(f"{what}: {path.name} is outside the folders this server may use "
                             "(the YAML's folder, its index folders, security.allowed_paths); "
                             "the operator can add a folder to security.allowed_paths")


def check_client_config(base: Config, cfg: Config, base_dir: Path | None, http: bool) -> list[str]:
    """Refuse what a client may not set in `retriever_init` (see the module doc). Returns the
    warnings for the reply: what of the call was ignored (`cfg` is changed in place)."""
    if not FROM_CLIENT.get():
        return []
    changed = changed_keys(base, cfg)
    if not changed:
        return []
    if http and not base.security.http.client_init:
        raise ForbiddenError(
            f"retriever_init over HTTP serves every client, so it may not change the operator's settings "
            f"({', '.join(changed)}); search a collection with retriever_fanout_search, or the operator sets "
            "security.http.client_init: true")
    operator_only = [k for k in changed if k in OPERATOR_ONLY]
    if operator_only:
        raise ForbiddenError(f"retriever_init: {operator_only[0]} comes from parameter.yaml, never from a tool call")
    endpoints = [k for k in changed if k in cfg.endpoints()]
    if endpoints and not base.security.client_endpoints:
        raise ForbiddenError(f"retriever_init: {endpoints[0]} comes from parameter.yaml or the environment, not "
                             "from a tool call (the operator can set security.client_endpoints: true)")
    confine_keys(cfg, changed)
    roots = allowed_roots(base, base_dir)
    paths = cfg.local_paths()
    for key in changed:
        if key in paths:
            _check_inside(paths[key], roots, key)
    problems = [p for p in (*_remote_code(base, cfg, changed), _model(base, cfg, changed, roots)) if p]
    if problems:
        raise ForbiddenError("retriever_init: " + "; ".join(problems))
    return _ignore_remote_code(base, cfg, changed)


def confine_keys(cfg: Config, changed: list[str]) -> None:
    """A key from the YAML or the environment goes only to the URL from the same place. In `cfg`
    (a client's, fresh from with_overrides), each section whose URL the call changed keeps only a
    key the call gave and is marked (Section.url_from_call) so that no key from the environment is
    added where the key is read (embedders/remote.py, websearch/, llm/client.py)."""
    for url, key in KEYED_URLS.items():
        if url not in changed:
            continue
        path, field = key.rsplit(".", 1)
        parent_path, _, name = path.rpartition(".")
        parent = _at(cfg, parent_path)
        section = getattr(parent, name)
        setattr(parent, name, section.with_url_from_call(**({} if key in changed else {field: None})))
    _confine_milvus(cfg, changed)


def _at(cfg: Config, dotted: str) -> Any:
    node: Any = cfg
    for part in filter(None, dotted.split(".")):
        node = getattr(node, part)
    return node


def _confine_milvus(cfg: Config, changed: list[str]) -> None:
    """The Milvus section reads MILVUS_TOKEN itself whenever its token is empty (indexes/), so a
    server URI from a call without a token of the call's own is refused while that variable is set."""
    milvus = cfg.index_backend_configs.milvus
    if "index_backend_configs.milvus.uri" not in changed or "://" not in milvus.uri:
        return
    if "index_backend_configs.milvus.token" not in changed:
        milvus = cfg.index_backend_configs.milvus = milvus.model_copy(update={"token": None})
    if not milvus.token and os.environ.get(MILVUS_TOKEN_ENV, "").strip():
        raise ForbiddenError(f"retriever_init: index_backend_configs.milvus.uri comes from this call, so it is "
                             f"sent only a token from the same call, never the operator's {MILVUS_TOKEN_ENV}; pass "
                             "index_backend_configs.milvus.token with it")


def _remote_code(base: Config, cfg: Config, changed: list[str]) -> list[str]:
    """A model's own code runs only where the operator's YAML says so: a call that switches it on
    for a model the call names, other than one the operator allows, is refused."""
    if _operator_allows(base, cfg, changed):
        return []
    return [f"{key} comes from parameter.yaml, not from a tool call (it would run the own code of the model "
            "this call names)" for key in REMOTE_CODE if key in changed and _at(cfg, key) is True]


def _operator_allows(base: Config, cfg: Config, changed: list[str]) -> bool:
    """The model is the YAML's own, the packaged MiniLM or one in security.allowed_models."""
    name = cfg.model_name_or_path.strip()
    return ("model_name_or_path" not in changed or name.lower() in MINILM_ALIASES
            or name in base.security.allowed_models)


def _ignore_remote_code(base: Config, cfg: Config, changed: list[str]) -> list[str]:
    """A call's trust_remote_code: true for a model the operator allows (UltraRAG passes its own
    parameter file's) is not honoured: `cfg` keeps the YAML's value, and the reply says so."""
    warnings = []
    for key in REMOTE_CODE:
        if key in changed and _at(cfg, key) is True:
            path, field = key.rsplit(".", 1)
            setattr(_at(cfg, path), field, _at(base, key))
            warnings.append(f"{key}: true from this call was ignored: a model's own code runs only where "
                            f"parameter.yaml says so (it says {str(_at(base, key)).lower()}); the operator sets it")
            log.warning("retriever_init: %s", warnings[-1])
    return warnings


def _model(base: Config, cfg: Config, changed: list[str], roots: list[Path]) -> str | None:
    """Why the model a call names may not be loaded, or None. A call may name the packaged MiniLM,
    a name in security.allowed_models, or a model folder inside the roots; never a name the server
    would fetch from a model hub."""
    if "model_name_or_path" not in changed or cfg.backend != "sentence_transformers":
        return None  # the other backends send the name to a server; they load no model here
    name = cfg.model_name_or_path.strip()
    if name.lower() in MINILM_ALIASES or name in base.security.allowed_models:
        return None
    folder = Path(name).expanduser()
    if not folder.exists():
        return (f"model_name_or_path {name!r} is neither a model folder inside the folders this server may use "
                "nor a model the operator lists (security.allowed_models); a tool call never makes the server "
                "download a model")
    if not inside(folder, roots):
        return (f"model_name_or_path: {folder.name} is outside the folders this server may use (the YAML's folder, "
                "its index folders, security.allowed_paths)")
    if cfg.backend_configs.sentence_transformers.trust_remote_code:
        return ("model_name_or_path: parameter.yaml's trust_remote_code covers its own model and "
                "security.allowed_models, not a folder a tool call names")
    return None
