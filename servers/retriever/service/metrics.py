"""The service's counters, gauges and histograms, written in Prometheus' text format (0.0.4).
One event loop updates them, so no lock is needed."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterator

Labels = tuple[tuple[str, str], ...]
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _labels(labels: Labels, le: str | None = None) -> str:
    """`{k="v",...}` (with a histogram bucket's bound `le`), or nothing for no labels."""
    parts = [f'{k}="{v}"' for k, v in (*labels, *((("le", le),) if le is not None else ()))]
    return "{" + ",".join(parts) + "}" if parts else ""


class Counter:
    kind = "counter"

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.doc = name, doc
        self.values: dict[Labels, float] = defaultdict(float)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self.values[tuple(sorted(labels.items()))] += amount

    def samples(self) -> Iterator[str]:
        for labels, value in sorted(self.values.items()):
            yield f"{self.name}{_labels(labels)} {value:g}"


class Gauge:
    kind = "gauge"

    def __init__(self, name: str, doc: str, read: Callable[[], float]) -> None:
        self.name, self.doc, self.read = name, doc, read

    def samples(self) -> Iterator[str]:
        yield f"{self.name} {self.read():g}"


class Histogram:
    kind = "histogram"

    def __init__(self, name: str, doc: str, buckets: tuple[float, ...]) -> None:
        self.name, self.doc, self.buckets = name, doc, buckets
        self.counts: dict[Labels, list[int]] = {}
        self.sums: dict[Labels, float] = defaultdict(float)

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        counts = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[key] += value

    def samples(self) -> Iterator[str]:
        for key, counts in sorted(self.counts.items()):
            total = 0
            for bound, n in zip((*self.buckets, float("inf")), counts):
                total += n
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                yield f"{self.name}_bucket{_labels(key, le)} {total}"
            yield f"{self.name}_sum{_labels(key)} {self.sums[key]:g}"
            yield f"{self.name}_count{_labels(key)} {total}"


class Metrics:
    def __init__(self, queue_depth: Callable[[], float]) -> None:
        self.requests = Counter("retriever_requests_total", "HTTP requests by route and status code")
        self.errors = Counter("retriever_errors_total", "Requests answered with a 4xx or 5xx status, by route")
        self.latency = Histogram("retriever_request_seconds", "Time from request to reply, by route",
                                 LATENCY_BUCKETS)
        self.batch_queries = Histogram("retriever_batch_queries", "Queries searched together in one batch",
                                       BATCH_BUCKETS)
        self.batch_seconds = Histogram("retriever_batch_seconds", "Time the compute side spent on one batch",
                                       LATENCY_BUCKETS)
        self.batch_requests = Histogram("retriever_batch_requests", "Requests merged into one batch", BATCH_BUCKETS)
        self.dropped = Counter("retriever_dropped_total", "Requests dropped or stopped: their caller left or timed out")
        self.rejected = Counter("retriever_rejected_total", "Requests refused with 503 because the queue was full")
        self.queue = Gauge("retriever_queue_depth", "Requests waiting for the compute thread", queue_depth)
        self.all = (self.requests, self.errors, self.latency, self.batch_queries, self.batch_seconds, self.batch_requests,
                    self.dropped,
                    self.rejected, self.queue)

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.inc(route=route, status=str(status))
        if status >= 400:
            self.errors.inc(route=route)
        self.latency.observe(seconds, route=route)

    def text(self) -> str:
        lines = []
        for metric in self.all:
            lines += [f"# HELP {metric.name} {metric.doc}", f"# TYPE {metric.name} {metric.kind}"]
            lines += list(metric.samples())
        return "\n".join(lines) + "\n"
