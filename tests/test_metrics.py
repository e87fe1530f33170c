"""The deployed service's metrics (service/metrics.py, prometheus-client): each app counts in a
registry of its own, and /metrics answers in the format the scraper's Accept header asks for.
tests/test_deploy.py reads them from a running `retriever deploy`."""

from __future__ import annotations

from retriever.service.metrics import Metrics


def samples(metrics: Metrics) -> dict[str, float]:
    body, _ = metrics.exposition()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in body.decode().splitlines() if line and not line.startswith("#")}


def test_two_apps_in_one_process_count_apart() -> None:
    one, two = Metrics(lambda: 4), Metrics(lambda: 0)
    one.observe("/search", 200, 0.02)
    one.observe("/search", 401, 0.001)
    one.dropped.labels(reason="timeout").inc()
    one.batch_queries.observe(5)
    got = samples(one)
    assert got['retriever_requests_total{route="/search",status="200"}'] == 1
    assert got['retriever_errors_total{route="/search"}'] == 1
    assert got['retriever_request_seconds_bucket{le="0.01",route="/search"}'] == 1
    assert got['retriever_request_seconds_count{route="/search"}'] == 2
    assert got['retriever_dropped_total{reason="timeout"}'] == 1
    assert got['retriever_batch_queries_bucket{le="4.0"}'] == 0 and got['retriever_batch_queries_bucket{le="8.0"}'] == 1
    assert got["retriever_queue_depth"] == 4 and got["retriever_rejected_total"] == 0
    assert not [name for name in got if "_created" in name]
    other = samples(two)
    assert other["retriever_queue_depth"] == 0 and not [name for name in other if name.startswith("retriever_requests")]


def test_the_format_follows_the_accept_header() -> None:
    metrics = Metrics(lambda: 0)
    body, content_type = metrics.exposition(None)
    assert content_type.startswith("text/plain; version=0.0.4") and b"# TYPE retriever_queue_depth gauge" in body
    body, content_type = metrics.exposition("application/openmetrics-text; version=1.0.0,text/plain;q=0.5")
    assert content_type.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
