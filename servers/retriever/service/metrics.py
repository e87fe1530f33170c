"""The service's counters, gauges and histograms, kept and written by `prometheus-client` in a
registry of the service's own (not the library's global one, so two apps in one process never
share or clash): text format 0.0.4 by default, OpenMetrics to a scraper that asks for it."""

from __future__ import annotations

from collections.abc import Callable

import prometheus_client as p
from prometheus_client.exposition import choose_encoder

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    def __init__(self, queue_depth: Callable[[], float]) -> None:
        p.disable_created_metrics()  # no `_created` series beside each counter and histogram
        self.registry = r = p.CollectorRegistry(auto_describe=True)
        self.requests = p.Counter("retriever_requests_total", "HTTP requests by route and status code",
                                  ["route", "status"], registry=r)
        self.errors = p.Counter("retriever_errors_total", "Requests answered with a 4xx or 5xx status, by route",
                                ["route"], registry=r)
        self.latency = p.Histogram("retriever_request_seconds", "Time from request to reply, by route", ["route"],
                                   buckets=LATENCY_BUCKETS, registry=r)
        self.batch_queries = p.Histogram("retriever_batch_queries", "Queries searched together in one batch",
                                         buckets=BATCH_BUCKETS, registry=r)
        self.batch_seconds = p.Histogram("retriever_batch_seconds", "Time the compute side spent on one batch",
                                         buckets=LATENCY_BUCKETS, registry=r)
        self.batch_requests = p.Histogram("retriever_batch_requests", "Requests merged into one batch",
                                          buckets=BATCH_BUCKETS, registry=r)
        self.dropped = p.Counter("retriever_dropped_total", "Requests dropped or stopped: their caller left or "
                                 "timed out", ["reason"], registry=r)
        self.rejected = p.Counter("retriever_rejected_total", "Requests refused with 503 because the queue was full",
                                  registry=r)
        self.queue = p.Gauge("retriever_queue_depth", "Requests waiting for the compute thread", registry=r)
        self.queue.set_function(queue_depth)

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, status=str(status)).inc()
        if status >= 400:
            self.errors.labels(route=route).inc()
        self.latency.labels(route=route).observe(seconds)

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The metrics in the format the `Accept` header asks for, and that format's content type."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type
