"""The engine: the Retriever that callers drive (retriever.py), where a session's documents live
and how they are written and searched (documents.py: the local change log or the index backend),
the change log's commit (changes.py) and ingest. It knows nothing of MCP, HTTP or pipelines."""

from .retriever import Retriever

__all__ = ["Retriever"]
