"""The prometheus view of the worker counters."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from codemojex.worker.metrics import register
from codemojex.worker.service import WorkerStats


def test_counters_are_exported_at_scrape_time() -> None:
    stats = WorkerStats()
    registry = CollectorRegistry()
    register(stats, registry)
    stats.score.scored += 7
    stats.sender.retry_after += 2
    text = generate_latest(registry).decode()
    assert "codemojex_worker_score_scored_total 7.0" in text
    assert "codemojex_worker_sent_retry_after_total 2.0" in text
    assert "codemojex_worker_pool_acked_total 0.0" in text
