"""What a client may ask for: paths inside the operator's roots, no endpoints or keys of its own,
and no settings other than the operator's over HTTP unless the YAML allows it.

The operator (parameter.yaml, `--set` on the command line) is trusted; a tool call is not. A
value a call passes that equals the operator's is no change and always allowed, so a pipeline
that repeats its YAML's settings in `retriever_init` keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .config import Config
from .errors import ForbiddenError

# Set by the layers that serve clients (the MCP tools) for the duration of a call: the checks
# below apply to it. The Python API and the command line are the operator's, and trusted.
FROM_CLIENT: ContextVar[bool] = ContextVar("retriever_from_client", default=False)

# Settings that name a place to send requests or the credentials to send: from the YAML or the
# environment only (a client could otherwise have the server send its key to the client's host).
ENDPOINT_KEYS = (
    "backend_configs.openai.base_url", "backend_configs.openai.api_key",
    "backend_configs.infinity.url", "backend_configs.infinity.api_key",
    "index_backend_configs.milvus.token", "retriever_url",
)
PATH_KEYS = (
    "corpus_path", "embedding_path", "docs_path", "collections_path", "backend_configs.bm25.save_path",
    "index_backend_configs.faiss.index_path", "security.http.tokens_file",
)
OPERATOR_ONLY = ("security", "limits")  # never from a client, whatever the YAML says


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
    paths = base.paths()
    roots = [paths.embedding.parent, paths.faiss, paths.bm25, paths.docs, base.collections_path,
             *base.security.allowed_paths]
    uri = base.index_backend_configs.milvus.uri
    if "://" not in uri:
        roots.append(Path(uri).parent)
    if base_dir is not None:
        roots.append(base_dir)
    return [r.resolve() for r in roots]


def inside(path: Path, roots: list[Path]) -> bool:
    real = path.resolve()  # follows symlinks: a link inside a root to a place outside is outside
    return any(real == r or real.is_relative_to(r) for r in roots)


def check_path(path: Path, roots: list[Path], what: str) -> Path:
    if FROM_CLIENT.get() and not inside(path, roots):
        raise ForbiddenError(f"{what}: {path} is outside the folders this server may use "
                             "(the YAML's folder, its index folders, security.allowed_paths); "
                             "the operator can add a folder to security.allowed_paths")
    return path


def check_client_config(base: Config, cfg: Config, base_dir: Path | None, http: bool) -> None:
    """Refuse what a client may not set in `retriever_init` (see the module doc)."""
    if not FROM_CLIENT.get():
        return
    changed = changed_keys(base, cfg)
    if not changed:
        return
    own = [k for k in changed if k.split(".")[0] in OPERATOR_ONLY]
    if own:
        raise ForbiddenError(f"retriever_init: {own[0]} is set by the operator in parameter.yaml, not by a tool call")
    if http and not base.security.http.client_init:
        raise ForbiddenError(
            f"retriever_init over HTTP serves every client, so it may not change the operator's settings "
            f"({', '.join(changed)}); search a collection with retriever_fanout_search, or the operator sets "
            "security.http.client_init: true")
    endpoints = [k for k in changed if k in ENDPOINT_KEYS or (k == "index_backend_configs.milvus.uri"
                                                              and "://" in cfg.index_backend_configs.milvus.uri)]
    if endpoints and not base.security.client_endpoints:
        raise ForbiddenError(f"retriever_init: {endpoints[0]} comes from parameter.yaml or the environment, not "
                             "from a tool call (the operator can set security.client_endpoints: true)")
    roots = allowed_roots(base, base_dir)
    for key in changed:
        if key in PATH_KEYS:
            value = _get(cfg, key)
            if value is not None:
                check_path(Path(value), roots, key)
        elif key == "index_backend_configs.milvus.uri" and "://" not in cfg.index_backend_configs.milvus.uri:
            check_path(Path(cfg.index_backend_configs.milvus.uri), roots, key)
        elif key == "model_name_or_path" and Path(cfg.model_name_or_path).expanduser().exists():
            check_path(Path(cfg.model_name_or_path).expanduser(), roots, key)


def _get(cfg: Config, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node
