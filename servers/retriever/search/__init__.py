"""Retrieval: the kinds of retriever (kinds.py: one record each, their rankers in rankers.py) behind one Protocol, composed by run.py
(search, multi-query) and fanout.py (several collections), with result stages (stages.py)."""

from .kinds import DEFAULT_MODE, KINDS, MODES
from .rankers import BM25, Dense, Hybrid, Ranker

__all__ = ["BM25", "DEFAULT_MODE", "KINDS", "MODES", "Dense", "Hybrid", "Ranker"]
