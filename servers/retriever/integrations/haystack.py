"""A Haystack component over this retriever: `run(query, top_k=None, filters=None) ->
{"documents": list[Document]}` (and `run_async`), each `Document` with the hit's id, text, score and
metadata (a file's chunk adds its citation as `meta["source"]`). It is saved in a pipeline's YAML
and loaded back (`Pipeline.dumps` / `Pipeline.loads`): the YAML holds the parameter.yaml's path or
the service's or the MCP server's URL, and the token only as the name of its environment variable.

    from retriever.integrations.haystack import Retriever
    retriever = Retriever.from_yaml("parameter.yaml", top_k=5)          # this library, in process
    retriever = Retriever.from_url("http://127.0.0.1:8000")             # token from RETRIEVER_TOKEN
    retriever = Retriever.from_mcp("http://127.0.0.1:8000/mcp")         # an MCP server's agent search
    pipeline.add_component("retriever", retriever)

Filters are Haystack's own, which are ours (filters.py); a call's `filters` replace the component's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.utils import Secret, deserialize_secrets_inplace
except ImportError as e:  # the extra is not installed
    raise ImportError("retriever.integrations.haystack needs Haystack: pip install 'mcp-retriever[haystack]'") from e

from ..errors import InvalidInputError
from . import translate
from .core import Found, Library, Searcher, SearchOptions, Service, aone, one
from .over_mcp import McpServer, mcp_check

if TYPE_CHECKING:
    from ..engine.retriever import Retriever as Engine

WHERE = "retriever.integrations.haystack"
TOKEN_ENV = "RETRIEVER_TOKEN"
ENV_TOKEN = Secret.from_env_var(TOKEN_ENV, strict=False)  # the default token: the environment's, if set


@component
class Retriever:
    """Give `parameter_file` (this library in process), `url` (a `retriever deploy` service) or
    `mcp_url` (an MCP server's agent `search` tool, one session for every run); `token` is the
    bearer token of either server: by default the environment's RETRIEVER_TOKEN, if set. `options`:
    the agent search's other options (core.SearchOptions: score_threshold, scale_score,
    collection, query_instruction, fusion, vector_weight, rrf_k, candidate_depth)."""

    def __init__(self, parameter_file: str | None = None, url: str | None = None,
                 token: Secret | None = ENV_TOKEN, mode: str = "hybrid",
                 top_k: int | None = None, filters: dict[str, Any] | None = None,
                 options: dict[str, Any] | None = None, timeout: float = 60.0, mcp_url: str | None = None) -> None:
        if [parameter_file, url, mcp_url].count(None) != 2:
            raise InvalidInputError(f"{WHERE}: give one of parameter_file (this library), mcp_url (an MCP server) "
                                    "or url (a deploy service)")
        self.parameter_file, self.url, self.mcp_url = parameter_file, url, mcp_url
        self.token, self.timeout = token, timeout
        self.mode, self.top_k, self.filters, self.options = mode, top_k, filters, dict(options or {})
        self._options = SearchOptions.of(WHERE, mode=mode, top_k=top_k, **self.options).changed(
            filters=translate.haystack(filters))
        if mcp_url is not None:
            mcp_check(self._options, WHERE)
        self._searcher: Searcher | None = None

    @classmethod
    def from_yaml(cls, path: str | Path = "parameter.yaml", **options: Any) -> Retriever:
        """This library in process, configured by `path` (its collection opened at warm-up or first run)."""
        return cls(parameter_file=str(path), **_split(options))

    @classmethod
    def from_url(cls, url: str, token: str | Secret | None = None, timeout: float = 60.0, **options: Any) -> Retriever:
        """A running `retriever deploy` service; `token` a string (not saved: such a component has no
        YAML) or a Haystack Secret (default: the environment's RETRIEVER_TOKEN)."""
        secret = Secret.from_token(token) if isinstance(token, str) else token
        return cls(url=url, token=secret or ENV_TOKEN, timeout=timeout,
                   **_split(options))

    @classmethod
    def from_mcp(cls, url: str, token: str | Secret | None = None, timeout: float = 60.0, **options: Any) -> Retriever:
        """A running MCP server's agent `search` tool (`retriever serve --transport http`; `url` as
        http://host:port/mcp); `token` as from_url's (default: the environment's RETRIEVER_TOKEN).
        Options: mode, top_k, filters, collection."""
        secret = Secret.from_token(token) if isinstance(token, str) else token
        return cls(mcp_url=url, token=secret or ENV_TOKEN, timeout=timeout, **_split(options))

    @classmethod
    def from_engine(cls, engine: Engine, parameter_file: str | Path, **options: Any) -> Retriever:
        """A `retriever.Retriever` this process already holds, made from `parameter_file` (what the
        pipeline's YAML records)."""
        made = cls(parameter_file=str(parameter_file), **_split(options))
        made._searcher = Library(engine, Path(parameter_file))
        return made

    def warm_up(self) -> None:
        """Open the searcher: the library loads its collection, model and indexes here."""
        searcher = self._opened()
        if isinstance(searcher, Library):
            from ..api.calls import opened

            opened(searcher.engine)

    def _opened(self) -> Searcher:
        if self._searcher is None:
            token = self.token.resolve_value() if self.token else None
            if self.parameter_file is not None:
                self._searcher = Library.from_yaml(self.parameter_file)
            elif self.mcp_url is not None:
                self._searcher = McpServer(self.mcp_url, token, self.timeout)
            else:
                self._searcher = Service(str(self.url), token, self.timeout)
        return self._searcher

    def close(self) -> None:
        """End what the searcher holds open (an MCP session); nothing for the others."""
        close = getattr(self._searcher, "close", None)
        if close is not None:
            close()

    def _call(self, top_k: int | None, filters: dict[str, Any] | None) -> tuple[Searcher, SearchOptions]:
        return self._opened(), self._options.changed(top_k=top_k, filters=translate.haystack(filters))

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """The hits of `query`, best first; `top_k` and `filters` (Haystack's) for this run."""
        searcher, options = self._call(top_k, filters)
        return {"documents": [_document(f) for f in one(searcher, query, options)]}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, top_k: int | None = None,
                        filters: dict[str, Any] | None = None) -> dict[str, Any]:
        searcher, options = self._call(top_k, filters)
        return {"documents": [_document(f) for f in await aone(searcher, query, options)]}

    def to_dict(self) -> dict[str, Any]:
        """The component's YAML: its init parameters; a token only as an environment variable's
        name (Haystack refuses to save a token given as a string)."""
        return default_to_dict(self, parameter_file=self.parameter_file, url=self.url, mcp_url=self.mcp_url,
                               token=self.token.to_dict() if self.token else None, mode=self.mode, top_k=self.top_k,
                               filters=self.filters, options=self.options or None, timeout=self.timeout)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Retriever:
        deserialize_secrets_inplace(data["init_parameters"], keys=["token"])
        return default_from_dict(cls, data)


def _split(options: dict[str, Any]) -> dict[str, Any]:
    """`from_*`'s keyword options as the component's init parameters: mode, top_k and filters by
    name, the rest in `options`."""
    named: dict[str, Any] = {k: options.pop(k) for k in ("mode", "top_k", "filters") if k in options}
    return {**named, "options": options}


def _document(f: Found) -> Document:
    return Document(id=f.id, content=f.text, meta=f.meta(), score=f.score)
