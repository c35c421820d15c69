"""What the route modules share: the caller's key, the application's state, and the answers
several routes build (a write's outcome, a namespace).

The application's state is set by :func:`memcurator.service.app.create_app`: ``pool``
(:class:`~memcurator.service.tenants.TenantPool`), ``keys``
(:class:`~memcurator.service.keys.KeyTable`), ``limiter``
(:class:`~memcurator.service.keys.RateLimiter`), ``hub`` (:class:`~memcurator.service.hub.Hub`)
and ``metrics`` (:class:`~memcurator.service.metrics.Metrics`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memcurator.errors import NamespaceNotFound
from memcurator.service.hub import Hub
from memcurator.service.keys import KeyInfo
from memcurator.service.metrics import Metrics
from memcurator.service.models import NamespaceOut, WriteResponse
from memcurator.service.tenants import Tenant, TenantPool

bearer = HTTPBearer(auto_error=False, description="An API key from `memcurator keys create`.")


def key_of(
    request: Request,
    cred: HTTPAuthorizationCredentials | None = Depends(bearer),
) -> KeyInfo:
    """The caller's live key (401 without one, 429 over its rate); the request's namespace
    for the metrics is the key's."""
    st = request.app.state
    k = st.keys.authenticate(cred.credentials if cred is not None else None)
    request.state.namespace = k.namespace
    st.limiter.check(k)
    return k


def pool_of(request: Request) -> TenantPool:
    """The application's tenants."""
    return request.app.state.pool  # type: ignore[no-any-return]


def hub_of(request: Request) -> Hub:
    """The application's peer hub."""
    return request.app.state.hub  # type: ignore[no-any-return]


def metrics_of(request: Request) -> Metrics:
    """The application's request and decision metrics."""
    return request.app.state.metrics  # type: ignore[no-any-return]


#: the caller's key, as a route parameter
Key = Annotated[KeyInfo, Depends(key_of)]
#: the tenants, as a route parameter
Pool = Annotated[TenantPool, Depends(pool_of)]
#: the hub, as a route parameter
HubDep = Annotated[Hub, Depends(hub_of)]
#: the metrics, as a route parameter
MetricsDep = Annotated[Metrics, Depends(metrics_of)]


def score(x: float) -> float | None:
    """A score for JSON: None where it is not finite."""
    return float(x) if math.isfinite(x) else None


def write_out(t: Tenant, r: Any, origin: str) -> WriteResponse:
    """The answer to a write (or update) ``r`` in tenant ``t``, with the budget after it."""
    m = t.memory
    return WriteResponse(
        id=r.id,
        admitted=r.admitted,
        reason=r.reason,
        score=score(r.score),
        evicted=list(r.evicted),
        distilled=list(r.distilled),
        origin=origin,
        used_bytes=m.used_bytes,
        max_bytes=m.max_bytes,
    )


def namespace_out(t: Tenant) -> NamespaceOut:
    """Tenant ``t``'s namespace: policy, budget, entries, decisions and step."""
    m = t.memory
    return NamespaceOut(
        name=m.namespace,
        policy=m.policy.name,
        max_bytes=m.max_bytes,
        used_bytes=m.used_bytes,
        entries=len(m),
        decisions=m.store.decision_count(m.namespace),
        step=m.step,
    )


def own_namespace(key: KeyInfo, name: str) -> None:
    """Raise :class:`~memcurator.errors.NamespaceNotFound` unless ``name`` is the key's."""
    if name != key.namespace:
        raise NamespaceNotFound("no such namespace")


__all__ = [
    "HubDep",
    "Key",
    "MetricsDep",
    "Pool",
    "bearer",
    "hub_of",
    "key_of",
    "metrics_of",
    "namespace_out",
    "own_namespace",
    "pool_of",
    "score",
    "write_out",
]
