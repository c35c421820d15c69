"""Liveness (``/healthz``, no key) and the namespace's Prometheus metrics (``/metrics``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from memcurator.service.metrics import CONTENT_TYPE
from memcurator.service.models import Health
from memcurator.service.routes.deps import Key, MetricsDep, Pool

router = APIRouter(tags=["service"])


@router.get("/healthz", response_model=Health)
def health(request: Request) -> Health:
    """Liveness; needs no key and says nothing about any tenant."""
    return Health(status="ok", version=request.app.version)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {CONTENT_TYPE: {}}}},
)
def metrics_text(key: Key, pool: Pool, metrics: MetricsDep) -> PlainTextResponse:
    """Prometheus text of the key's namespace (admin scope)."""
    key.require("admin")
    with pool.using(key) as t:
        m = t.memory
        metrics.fold_decisions(key.namespace, m.decisions(since=metrics.seen_seq[key.namespace]))
        gauges: dict[str, float | None] = {
            "used_bytes": float(m.used_bytes),
            "max_bytes": None if m.max_bytes is None else float(m.max_bytes),
            "entries": float(len(m)),
        }
    return PlainTextResponse(metrics.render(key.namespace, gauges), media_type=CONTENT_TYPE)


__all__ = ["router"]
