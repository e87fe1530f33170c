"""mcp-retriever: an MCP tool server for dense, BM25 and (soon) hybrid retrieval.

`import retriever` stays light: heavy libraries load when a backend is first built.
"""

from .config import Config, load_config
from .engine.retriever import Retriever
from .errors import RetrieverError
from .types import Document, Hit

__all__ = ["Config", "Document", "Hit", "Retriever", "RetrieverError", "load_config"]
__version__ = "0.1.0"
