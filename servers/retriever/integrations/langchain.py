"""A LangChain retriever over this retriever: a `BaseRetriever` returning `Document`s with the hit's
id, text and metadata, its score as `metadata["score"]` and, for a file's chunk, its citation as
`metadata["source"]` (document, path, page, heading, ...).

    from retriever.integrations.langchain import Retriever
    retriever = Retriever.from_yaml("parameter.yaml", top_k=5)          # this library, in process
    retriever = Retriever.from_url("http://127.0.0.1:8000", token=...)  # a `retriever deploy` service
    retriever = Retriever.from_mcp("http://127.0.0.1:8000/mcp", token=...)  # an MCP server's agent search
    docs = retriever.invoke("what is BM25?", filter={"topic": "biology"}, k=3)

`filter` takes the dictionaries of LangChain's vector stores (translate.py says what maps), on the
retriever or per call; `k` (or `top_k`) per call.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # the extra is not installed
    raise ImportError("retriever.integrations.langchain needs LangChain: pip install 'mcp-retriever[langchain]'") from e

from pydantic import ConfigDict, PrivateAttr

from ..errors import InvalidInputError
from . import translate
from .core import Found, Library, Searcher, SearchOptions, Service, aone, one
from .over_mcp import McpServer

if TYPE_CHECKING:
    from ..engine.retriever import Retriever as Engine

WHERE = "retriever.integrations.langchain"


class Retriever(BaseRetriever):
    """Make it with `from_yaml`, `from_url`, `from_mcp` or `from_engine`; `filter` is a LangChain filter
    dictionary, `search_options` the agent search's other options (core.SearchOptions: mode,
    top_k, score_threshold, scale_score, collection, query_instruction, fusion, ...)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: Any  # core.Searcher: the library (Library), a deploy service (Service) or an MCP server (McpServer)
    filter: dict[str, Any] | None = None
    search_options: dict[str, Any] = {}
    _options: SearchOptions = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        if "filters" in self.search_options:
            raise InvalidInputError(f"{WHERE}: give the filter as filter= (LangChain's dictionaries, translated), "
                                    "not filters=")
        self._options = SearchOptions.of(WHERE, **self.search_options).changed(
            filters=translate.langchain(self.filter))

    @classmethod
    def from_yaml(cls, path: str | Path = "parameter.yaml", filter: dict[str, Any] | None = None,
                  **options: Any) -> Retriever:
        """This library in process, configured by `path` (its collection opened on the first search)."""
        return cls(searcher=Library.from_yaml(path), filter=filter, search_options=options)

    @classmethod
    def from_url(cls, url: str, token: str | None = None, timeout: float = 60.0,
                 filter: dict[str, Any] | None = None, **options: Any) -> Retriever:
        """A running `retriever deploy` service (`url` as http://host:port; `token`: its bearer token)."""
        return cls(searcher=Service(url, token, timeout), filter=filter, search_options=options)

    @classmethod
    def from_mcp(cls, url: str, token: str | None = None, timeout: float = 60.0,
                 filter: dict[str, Any] | None = None, **options: Any) -> Retriever:
        """A running MCP server's agent `search` tool (`retriever serve --transport http`; `url` as
        http://host:port/mcp, `token`: its bearer token), one MCP session for every call (`close()`
        ends it). Options: mode, top_k, collection (and `filter`)."""
        searcher = McpServer(url, token, timeout)
        made = cls(searcher=searcher, filter=filter, search_options=options)
        searcher.check(made._options)
        return made

    @classmethod
    def from_engine(cls, engine: Engine, filter: dict[str, Any] | None = None, **options: Any) -> Retriever:
        """A `retriever.Retriever` this process already holds (one engine for several retrievers)."""
        return cls(searcher=Library(engine), filter=filter, search_options=options)

    def close(self) -> None:
        """End what the searcher holds open (an MCP session); nothing for the others."""
        close = getattr(self.searcher, "close", None)
        if close is not None:
            close()

    def _call_options(self, filter: dict[str, Any] | None, k: int | None, top_k: int | None) -> SearchOptions:
        """The retriever's options with a call's `filter` (in place of the retriever's) and `k`."""
        return self._options.changed(filters=translate.langchain(filter), top_k=k or top_k)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                filter: dict[str, Any] | None = None, k: int | None = None,
                                top_k: int | None = None) -> list[Document]:
        searcher: Searcher = self.searcher
        return [_document(f) for f in one(searcher, query, self._call_options(filter, k, top_k))]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       filter: dict[str, Any] | None = None, k: int | None = None,
                                       top_k: int | None = None) -> list[Document]:
        searcher: Searcher = self.searcher
        return [_document(f) for f in await aone(searcher, query, self._call_options(filter, k, top_k))]


def _document(f: Found) -> Document:
    return Document(id=f.id, page_content=f.text, metadata={**f.meta(), "score": f.score})
