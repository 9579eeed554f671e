"""Prometheus view of the worker's counters (optional: nothing is exported unless asked).

The counters live in plain dataclasses (WorkerStats) so that the demo and the logs read them
without prometheus; this collector only presents them, at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from codemojex.worker.service import WorkerStats


class WorkerCollector(Collector):
    def __init__(self, stats: WorkerStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        for name, value in self._stats.as_dict().items():
            family = CounterMetricFamily(
                f"codemojex_worker_{name}", f"codemojex worker counter {name}"
            )
            family.add_metric([], float(value))
            yield family


def register(stats: WorkerStats, registry: CollectorRegistry) -> WorkerCollector:
    collector = WorkerCollector(stats)
    registry.register(collector)
    return collector


def serve(stats: WorkerStats, port: int, addr: str = "127.0.0.1") -> CollectorRegistry:
    """Expose the counters on http://addr:port/metrics (a thread of prometheus_client)."""
    registry = CollectorRegistry()
    register(stats, registry)
    start_http_server(port, addr=addr, registry=registry)
    return registry
