"""The engine: a session per configuration (session.py), its writes (changes.py) and the Retriever
that callers drive (retriever.py). It knows nothing of MCP, HTTP or pipelines."""

from .retriever import Retriever

__all__ = ["Retriever"]
