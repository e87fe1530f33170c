"""The API every caller speaks: typed requests (models.py), their engine calls (calls.py) and
the replies (replies.py: UltraRAG's keys, the budget, paging)."""

from .calls import call
from .models import Request

__all__ = ["Request", "call"]
