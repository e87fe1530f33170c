"""The API every caller speaks: typed requests (models.py), their engine calls (calls.py) and
the replies (replies.py: UltraRAG's keys, the budget, paging)."""

from .models import Request
from .registry import call

__all__ = ["Request", "call"]
