"""The REST API of ``memcurator serve``: :func:`create_app` assembles it over any store.

Every route but ``/healthz`` needs ``Authorization: Bearer <key>``; the key alone names the
tenant (:mod:`memcurator.service.keys`), so no path, body or header chooses a namespace. Routes
that take an entry id look it up only inside the key's namespace, and answer another
namespace's id exactly as an id that never existed (:mod:`memcurator.service.problems`).

The routes live in :mod:`memcurator.service.routes` (one module per area); the body limit,
error handlers and the guard middleware in :mod:`memcurator.service.guard`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import Depends, FastAPI

from memcurator.service import guard
from memcurator.service.guard import MAX_BODY_BYTES
from memcurator.service.hub import Hub
from memcurator.service.keys import KeyTable, RateLimiter
from memcurator.service.metrics import Metrics
from memcurator.service.models import Problem
from memcurator.service.observations import attach
from memcurator.service.problems import MEDIA_TYPE
from memcurator.service.routes import (
    admin,
    embeddings,
    entries,
    feedback,
    health,
    hub,
    provenance,
    recall,
)
from memcurator.service.tenants import TenantPool

_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {
        "model": Problem,
        "description": d,
        "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for s, d in (
        (401, "Missing, malformed, unknown or revoked key"),
        (403, "The key lacks the scope, or claims an origin it does not hold"),
        (404, "No such entry (or recall) in this namespace"),
        (409, "Conflicts with what the namespace holds"),
        (413, "Larger than the budget or the body limit"),
        (422, "Invalid request"),
        (429, "Over the key's rate limit, or the hub's byte cap"),
    )
}


def _pkg_version() -> str:
    try:
        return version("memcurator")
    except PackageNotFoundError:  # pragma: no cover - running from a tree without metadata
        return "unknown"


def create_app(
    store_url: str,
    *,
    keys: KeyTable | str,
    ring_path: str | None = None,
    memory_options: dict[str, Any] | None = None,
    rate_clock: Callable[[], float] = time.time,
    max_body_bytes: int = MAX_BODY_BYTES,
    peer_hub: Hub | None = None,
) -> FastAPI:
    """The FastAPI application serving ``store_url``.

    Parameters
    ----------
    store_url : str
        Opened by :class:`~memcurator.Memory` for each tenant (a SQLite path or a store URL).
    keys : KeyTable or str
        The key table, or the path of its file. Its state
        (:mod:`memcurator.service.state`) also holds the hub's queue, the rate limiter's
        buckets and the recall ids, so replicas over one state serve as one.
    ring_path : str, optional
        A key ring file of an earlier version, imported into the shared state (see
        :class:`~memcurator.service.tenants.TenantPool`); the ring lives in the shared state.
    memory_options : dict, optional
        Extra :class:`~memcurator.Memory` arguments for every tenant (``embedder``, ``seed``).
    rate_clock : callable () -> float
        Seconds for the rate limiter (wall-clock: replicas share the buckets; tests pass a
        fake clock).
    max_body_bytes : int, default 1 MiB
        Larger request bodies are refused (413): a declared ``Content-Length`` before the body
        is read, a streamed (chunked) body as soon as it passes the limit.
    peer_hub : Hub, optional
        The peers' hub (its byte caps and retention); by default one with the defaults of
        :class:`~memcurator.service.hub.Hub`, in the key table's state.

    Returns
    -------
    FastAPI
        ``app.state.pool`` holds the tenants; close it with ``app.state.pool.close()``.
    """
    table = keys if isinstance(keys, KeyTable) else KeyTable(keys)
    app = FastAPI(
        title="memcurator",
        version=_pkg_version(),
        description="A governed agent memory: write, recall, feedback and forget under a byte "
        "budget, every decision logged. Tenants by API key.",
        responses=_ERRORS,
    )
    app.state.pool = TenantPool(store_url, table, ring_path, memory_options)
    app.state.keys = table
    app.state.limiter = RateLimiter(clock=rate_clock, state=table.state)
    app.state.metrics = Metrics()
    app.state.hub = Hub(state=table.state) if peer_hub is None else peer_hub
    app.state.reads = attach(app.state.pool)  # what each key's session observed
    guard.install(app, max_body_bytes)
    writes_in_session = [Depends(provenance.in_session)]  # write, update, record: checked
    app.include_router(health.router)
    app.include_router(entries.router, dependencies=writes_in_session)
    app.include_router(recall.router)
    app.include_router(embeddings.router)
    app.include_router(feedback.router, dependencies=writes_in_session)
    app.include_router(provenance.router)
    app.include_router(admin.router)
    app.include_router(hub.router)
    # /ui (the inspector) and an offline /docs
    from memcurator.service.inspector import mount_inspector
    from memcurator.service.routes.deps import key_of

    mount_inspector(app, key_of)
    return app


__all__ = ["MAX_BODY_BYTES", "create_app"]
