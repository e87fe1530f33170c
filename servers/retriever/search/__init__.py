"""Retrieval: the kinds of retriever (rankers.py) behind one Protocol, composed by run.py
(search, multi-query) and fanout.py (several collections), with result stages (stages.py)."""

from .rankers import BM25, KINDS, MODES, Dense, Hybrid, Ranker

__all__ = ["BM25", "KINDS", "MODES", "Dense", "Hybrid", "Ranker"]
