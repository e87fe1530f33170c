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


def _check_inside(path: Path, roots: list[Path], what: str) -> None:
    if not inside(path, roots):
        raise ForbiddenError(f"{what}: {path} is outside the folders this server may use "
                             "(the YAML's folder, its index folders, security.allowed_paths); "
                             "the operator can add a folder to security.allowed_paths")


def check_client_config(base: Config, cfg: Config, base_dir: Path | None, http: bool) -> None:
    """Refuse what a client may not set in `retriever_init` (see the module doc)."""
    if not FROM_CLIENT.get():
        return
    changed = changed_keys(base, cfg)
    if not changed:
        return
    if http and not base.security.http.client_init:
        raise ForbiddenError(
            f"retriever_init over HTTP serves every client, so it may not change the operator's settings "
            f"({', '.join(changed)}); search a collection with retriever_fanout_search, or the operator sets "
            "security.http.client_init: true")
    endpoints = [k for k in changed if k in cfg.endpoints()]
    if endpoints and not base.security.client_endpoints:
        raise ForbiddenError(f"retriever_init: {endpoints[0]} comes from parameter.yaml or the environment, not "
                             "from a tool call (the operator can set security.client_endpoints: true)")
    roots = allowed_roots(base, base_dir)
    paths = cfg.local_paths()
    for key in changed:
        if key in paths:
            _check_inside(paths[key], roots, key)
        elif key == "model_name_or_path" and Path(cfg.model_name_or_path).expanduser().exists():
            _check_inside(Path(cfg.model_name_or_path).expanduser(), roots, key)
