"""`retriever deploy`: the HTTP service (app.py) over the api models, with micro-batching
(batcher.py), metrics (metrics.py) and an OpenAPI description (openapi.py)."""

from .app import build_app

__all__ = ["build_app"]
