"""Pipelines: UltraRAG's server contract (ultrarag.py)."""
