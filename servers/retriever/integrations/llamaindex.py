"""A LlamaIndex retriever over this retriever: `BaseRetriever` (sync and async) returning
`NodeWithScore`s, each a `TextNode` with the hit's id, text and metadata (a file's chunk adds its
citation as `metadata["source"]`) and the hit's score.

    from retriever.integrations.llamaindex import Retriever
    retriever = Retriever.from_yaml("parameter.yaml", top_k=5)          # this library, in process
    retriever = Retriever.from_url("http://127.0.0.1:8000", token=...)  # a `retriever deploy` service
    retriever = Retriever.from_mcp("http://127.0.0.1:8000/mcp", token=...)  # an MCP server's agent search
    nodes = retriever.retrieve("what is BM25?")

Filters are LlamaIndex's `MetadataFilters` (translate.py says what maps).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:  # the extra is not installed
    raise ImportError("retriever.integrations.llamaindex needs LlamaIndex: pip install 'mcp-retriever[llamaindex]'"
                      ) from e

from . import translate
from .core import Found, Library, Searcher, SearchOptions, Service, aone, one
from .over_mcp import McpServer

if TYPE_CHECKING:
    from llama_index.core.callbacks import CallbackManager

    from ..engine.retriever import Retriever as Engine

WHERE = "retriever.integrations.llamaindex"


class Retriever(BaseRetriever):
    """Make it with `from_yaml`, `from_url`, `from_mcp` or `from_engine`; `filters` is LlamaIndex's
    `MetadataFilters`, the other options the agent search's (core.SearchOptions: mode, top_k,
    score_threshold, scale_score, collection, query_instruction, fusion, vector_weight, rrf_k,
    candidate_depth)."""

    def __init__(self, searcher: Searcher, filters: Any = None, callback_manager: CallbackManager | None = None,
                 **options: Any) -> None:
        self.searcher = searcher
        self.filters = filters  # LlamaIndex's, as given
        self.options = SearchOptions.of(WHERE, **options).changed(filters=translate.llamaindex(filters))
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def from_yaml(cls, path: str | Path = "parameter.yaml", **options: Any) -> Retriever:
        """This library in process, configured by `path` (its collection opened on the first search)."""
        return cls(Library.from_yaml(path), **options)

    @classmethod
    def from_url(cls, url: str, token: str | None = None, timeout: float = 60.0, **options: Any) -> Retriever:
        """A running `retriever deploy` service (`url` as http://host:port; `token`: its bearer token)."""
        return cls(Service(url, token, timeout), **options)

    @classmethod
    def from_mcp(cls, url: str, token: str | None = None, timeout: float = 60.0, **options: Any) -> Retriever:
        """A running MCP server's agent `search` tool (`retriever serve --transport http`; `url` as
        http://host:port/mcp, `token`: its bearer token), one MCP session for every call (`close()`
        ends it). Options: mode, top_k, filters, collection."""
        searcher = McpServer(url, token, timeout)
        made = cls(searcher, **options)
        searcher.check(made.options)
        return made

    @classmethod
    def from_engine(cls, engine: Engine, **options: Any) -> Retriever:
        """A `retriever.Retriever` this process already holds (one engine for several retrievers)."""
        return cls(Library(engine), **options)

    def close(self) -> None:
        """End what the searcher holds open (an MCP session); nothing for the others."""
        close = getattr(self.searcher, "close", None)
        if close is not None:
            close()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(f) for f in one(self.searcher, query_bundle.query_str, self.options)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(f) for f in await aone(self.searcher, query_bundle.query_str, self.options)]


def _node(f: Found) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=f.id, text=f.text, metadata=f.meta()), score=f.score)
