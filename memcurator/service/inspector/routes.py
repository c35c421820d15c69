"""The inspector's routes under ``/ui/api`` (:func:`inspector_router`).

Each route takes the service's key dependency and checks the same scope the matching ``/v1``
route checks; an entry id is looked up only in the key's namespace, and another namespace's
id is answered exactly as one that never existed (404 ``no such entry``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from memcurator.errors import Forbidden
from memcurator.limits import MAX_INT
from memcurator.service.filters import compile_where
from memcurator.service.inspector import views
from memcurator.service.inspector.queries import DecisionFilter, EntryFilter, RecallProbe
from memcurator.service.keys import KeyInfo

Json = dict[str, Any]


def inspector_router(key_of: Callable[..., KeyInfo]) -> APIRouter:
    """The ``/ui/api`` routes, authenticated by ``key_of`` (the service's dependency).

    Parameters
    ----------
    key_of : callable
        A FastAPI dependency returning the request's :class:`KeyInfo`.

    Returns
    -------
    APIRouter
    """
    # the page's own routes, not the API's contract: kept out of /openapi.json (and so out of
    # /docs and the OpenAPI-driven probes of tests/test_service*.py, which cover /v1);
    # tests/test_inspector_api.py probes these for keys, scopes and isolation
    r = APIRouter(prefix="/ui/api", tags=["inspector"], include_in_schema=False)
    _namespace_routes(r, key_of)
    _entry_routes(r, key_of)
    _log_and_recall_routes(r, key_of)
    _probation_routes(r, key_of)
    _peer_and_glossary_routes(r, key_of)
    return r


def _pool(request: Request) -> Any:
    """The service's tenant pool."""
    return request.app.state.pool


def _on_memory(
    request: Request, key: KeyInfo, scope: str, view: Callable[..., Any], *args: Any, **kw: Any
) -> Any:
    """``view(memory, *args, **kw)`` on the key's namespace once the key holds ``scope``."""
    key.require(scope)
    with _pool(request).using(key) as t:
        return view(t.memory, *args, **kw)


def _namespace_routes(r: APIRouter, key_of: Callable[..., KeyInfo]) -> None:
    """``/whoami``, ``/overview`` and ``/usage``."""
    replays: dict[str, views.UsageReplay] = {}  # per namespace; advanced under its tenant lock

    @r.get("/whoami")
    def whoami(key: KeyInfo = Depends(key_of)) -> Json:
        """The key's holder, namespace, origin and scopes (what the page may offer)."""
        return {
            "name": key.name,
            "namespace": key.namespace,
            "origin": key.origin,
            "scopes": list(key.scopes),
        }

    @r.get("/overview")
    def overview(request: Request, key: KeyInfo = Depends(key_of)) -> Json:
        """The key's namespace: budget, policy, entries by state, kind and origin (read)."""
        return _on_memory(request, key, "read", views.overview)

    @r.get("/usage")
    def usage(request: Request, key: KeyInfo = Depends(key_of)) -> Json:
        """Bytes used over the decision log, replayed, and the budget (read)."""
        key.require("read")
        with _pool(request).using(key) as t:
            replay = replays.setdefault(key.namespace, views.UsageReplay())
            return views.usage(t.memory, replay)


def _entry_routes(r: APIRouter, key_of: Callable[..., KeyInfo]) -> None:
    """``/entries``, ``/entries/{id}`` and ``/entries/{id}/value``."""

    @r.get("/entries")
    def entries(
        request: Request,
        f: Annotated[EntryFilter, Query()],
        key: KeyInfo = Depends(key_of),
        order: Annotated[str, Query(pattern="^(newest|oldest)$")] = "newest",
        offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Json:
        """One page of resident entries by text search and filters (read)."""
        newest = order == "newest"
        return _on_memory(
            request, key, "read", views.list_entries, f, newest, offset=offset, limit=limit
        )

    @r.get("/entries/{entry_id}")
    def entry(request: Request, entry_id: str, key: KeyInfo = Depends(key_of)) -> Json:
        """One entry of the key's namespace, resident or only in the log (read)."""
        return _on_memory(request, key, "read", views.entry_detail, entry_id)

    @r.get("/entries/{entry_id}/value")
    def entry_value(request: Request, entry_id: str, key: KeyInfo = Depends(key_of)) -> Json:
        """A resident entry's value terms under the namespace's policy (read)."""
        return _on_memory(request, key, "read", views.value_terms, entry_id)


def _log_and_recall_routes(r: APIRouter, key_of: Callable[..., KeyInfo]) -> None:
    """``/decisions`` and ``/recall``."""

    @r.get("/decisions")
    def decisions(
        request: Request,
        f: Annotated[DecisionFilter, Query()],
        key: KeyInfo = Depends(key_of),
        before: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> Json:
        """The decision log newest first, filtered by action, reason, origin, peer, entry
        (read)."""
        return _on_memory(request, key, "read", views.decisions_page, f, before, limit)

    @r.post("/recall")
    def recall(request: Request, body: RecallProbe, key: KeyInfo = Depends(key_of)) -> Json:
        """A recall with each candidate's scores and what each filter left out (read); it
        neither observes the query nor logs anything."""
        key.require("read")
        where = compile_where(body.where)
        with _pool(request).using(key) as t:
            return views.recall_explained(t.memory, body, where)


def _probation_routes(r: APIRouter, key_of: Callable[..., KeyInfo]) -> None:
    """``/probation`` and its two actions (admin scope)."""

    @r.get("/probation")
    def probation(
        request: Request,
        key: KeyInfo = Depends(key_of),
        offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Json:
        """Entries on trust probation with their evidence (read)."""
        return _on_memory(request, key, "read", views.probation_queue, offset=offset, limit=limit)

    @r.post("/probation/{entry_id}/release")
    def release(
        request: Request,
        entry_id: str,
        reason: Annotated[str, Query(min_length=1, max_length=1000, description="Logged")],
        key: KeyInfo = Depends(key_of),
    ) -> Json:
        """Release an entry from probation (admin scope), logged with the key's name."""
        return _on_memory(request, key, "admin", views.release, entry_id, key.name, reason)

    @r.post("/probation/{entry_id}/forget")
    def forget(
        request: Request,
        entry_id: str,
        reason: Annotated[str, Query(min_length=1, max_length=1000, description="Logged")],
        key: KeyInfo = Depends(key_of),
    ) -> Json:
        """Forget an entry on probation (admin scope), logged with the key's name."""
        return _on_memory(request, key, "admin", views.forget_held, entry_id, key.name, reason)


def _peer_and_glossary_routes(r: APIRouter, key_of: Callable[..., KeyInfo]) -> None:
    """``/peers`` and ``/glossary``."""

    @r.get("/peers")
    def peers(request: Request, key: KeyInfo = Depends(key_of)) -> Json:
        """Hub traffic per peer of the key's group and what this namespace kept of it (peer
        or admin scope, as the hub's routes)."""
        if "peer" not in key.scopes and "admin" not in key.scopes:
            raise Forbidden("the hub's traffic needs the 'peer' or 'admin' scope")
        with _pool(request).using(key) as t:
            return views.peer_traffic(t.memory, request.app.state.hub, key.namespace)

    @r.get("/glossary")
    def glossary(key: KeyInfo = Depends(key_of)) -> list[Json]:
        """The terms of ``memcurator explain`` (any key)."""
        from memcurator.glossary import GLOSSARY

        return [{"name": g.name, "text": g.text, "aliases": list(g.aliases)} for g in GLOSSARY]


__all__ = ["RecallProbe", "inspector_router"]
