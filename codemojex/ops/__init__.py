"""What operators see and steer: Prometheus metrics, health checks and the ops page.

The instruments themselves are `codemojex/metrics.py`, a leaf below every layer (any layer
observes into it).

- `collect`: the collectors that turn the components' stats objects and the queue's books
  into Prometheus series at scrape time.
- `health`: /healthz, /readyz and the schema check bot and worker start with.
- `server`: the /metrics + /healthz + /readyz endpoint of bot and worker
  (CODEMOJEX_METRICS_PORT), and the systemd watchdog.
- `fleet`: every process publishes a few counters to Redis for the ops page (`keys`).
- `page/`: `codemojex ops`, the operator page (aiohttp, Jinja2 templates, a vendored chart).
"""
