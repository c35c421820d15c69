"""The inspector's routes under ``/ui/api`` (:func:`inspector_router`).

Each route takes the service's key dependency and checks the same scope the matching ``/v1``
route checks; an entry id is looked up only in the key's namespace, and another namespace's
id is answered exactly as one that never existed (404 ``no such entry``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from memcurator.errors import Forbidden
from memcurator.limits import MAX_INT
from memcurator.service.filters import compile_where
from memcurator.service.inspector import views
from memcurator.service.inspector.queries import DecisionFilter, EntryFilter, RecallProbe
from memcurator.service.keys import KeyInfo

Json = dict[str, Any]


@dataclass(frozen=True)
class Caller:
    """A request's key (the service's key dependency) and the app's state (tenant pool, hub):
    what every inspector route takes, as one dependency."""

    key: KeyInfo
    app: Any

    def on(self, scope: str, view: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """``view(memory, *args, **kw)`` on the key's namespace once the key holds ``scope``.

        Raises
        ------
        Forbidden
            The key lacks ``scope``.
        """
        self.key.require(scope)
        with self.app.pool.using(self.key) as t:
            return view(t.memory, *args, **kw)


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

    def caller(request: Request, key: KeyInfo = Depends(key_of)) -> Caller:
        return Caller(key, request.app.state)

    # the page's own routes, not the API's contract: kept out of /openapi.json (and so out of
    # /docs and the OpenAPI-driven probes of tests/test_service*.py, which cover /v1);
    # tests/test_inspector_api.py probes these for keys, scopes and isolation
    r = APIRouter(prefix="/ui/api", tags=["inspector"], include_in_schema=False)
    c = Depends(caller)
    _namespace_routes(r, c)
    _entry_routes(r, c)
    _log_and_recall_routes(r, c)
    _probation_routes(r, c)
    _peer_and_glossary_routes(r, c)
    return r


def _namespace_routes(r: APIRouter, on: Any) -> None:
    """``/whoami``, ``/overview`` and ``/usage``."""
    replays: dict[str, views.UsageReplay] = {}  # per namespace; advanced under its tenant lock

    @r.get("/whoami")
    def whoami(c: Caller = on) -> Json:
        """The key's holder, namespace, origin and scopes (what the page may offer)."""
        key = c.key
        return {
            "name": key.name,
            "namespace": key.namespace,
            "origin": key.origin,
            "scopes": list(key.scopes),
        }

    @r.get("/overview")
    def overview(c: Caller = on) -> Json:
        """The key's namespace: budget, policy, entries by state, kind and origin (read)."""
        return c.on("read", views.overview)

    @r.get("/usage")
    def usage(c: Caller = on) -> Json:
        """Bytes used over the decision log, replayed, and the budget (read)."""
        c.key.require("read")
        with c.app.pool.using(c.key) as t:
            replay = replays.setdefault(c.key.namespace, views.UsageReplay())
            return views.usage(t.memory, replay)


def _entry_routes(r: APIRouter, on: Any) -> None:
    """``/entries``, ``/entries/{id}`` and ``/entries/{id}/value``."""

    @r.get("/entries")
    def entries(
        f: Annotated[EntryFilter, Query()],
        c: Caller = on,
        order: Annotated[str, Query(pattern="^(newest|oldest)$")] = "newest",
        offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Json:
        """One page of resident entries by text search and filters (read)."""
        newest = order == "newest"
        return c.on("read", views.list_entries, f, newest, offset=offset, limit=limit)

    @r.get("/entries/{entry_id}")
    def entry(entry_id: str, c: Caller = on) -> Json:
        """One entry of the key's namespace, resident or only in the log (read)."""
        return c.on("read", views.entry_detail, entry_id)

    @r.get("/entries/{entry_id}/value")
    def entry_value(entry_id: str, c: Caller = on) -> Json:
        """A resident entry's value terms under the namespace's policy (read)."""
        return c.on("read", views.value_terms, entry_id)


def _log_and_recall_routes(r: APIRouter, on: Any) -> None:
    """``/decisions`` and ``/recall``."""

    @r.get("/decisions")
    def decisions(
        f: Annotated[DecisionFilter, Query()],
        c: Caller = on,
        before: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> Json:
        """The decision log newest first, filtered by action, reason, origin, peer, entry
        (read)."""
        return c.on("read", views.decisions_page, f, before, limit)

    @r.post("/recall")
    def recall(body: RecallProbe, c: Caller = on) -> Json:
        """A recall with each candidate's scores and what each filter left out (read); it
        neither observes the query nor logs anything."""
        c.key.require("read")  # before the conditions are compiled: a 403 before a 400
        return c.on("read", views.recall_explained, body, compile_where(body.where))


def _probation_routes(r: APIRouter, on: Any) -> None:
    """``/probation`` and its two actions (admin scope)."""

    @r.get("/probation")
    def probation(
        c: Caller = on,
        offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Json:
        """Entries on trust probation with their evidence (read)."""
        return c.on("read", views.probation_queue, offset=offset, limit=limit)

    for action in views.SETTLE:
        r.add_api_route(f"/probation/{{entry_id}}/{action}", _settle(on, action), methods=["POST"])


def _settle(on: Any, action: str) -> Callable[..., Json]:
    """The route of one probation action (``release``, ``forget``): admin scope, logged with
    the key's name and the reason given (:func:`views.settle`)."""

    def settle(
        entry_id: str,
        reason: Annotated[str, Query(min_length=1, max_length=1000, description="Logged")],
        c: Caller = on,
    ) -> Json:
        return c.on("admin", views.settle, entry_id, c.key.name, reason, action)

    settle.__name__ = action
    return settle


def _peer_and_glossary_routes(r: APIRouter, on: Any) -> None:
    """``/peers`` and ``/glossary``."""

    @r.get("/peers")
    def peers(c: Caller = on) -> Json:
        """Hub traffic per peer of the key's group and what this namespace kept of it (peer
        or admin scope, as the hub's routes)."""
        if "peer" not in c.key.scopes and "admin" not in c.key.scopes:
            raise Forbidden("the hub's traffic needs the 'peer' or 'admin' scope")
        with c.app.pool.using(c.key) as t:
            return views.peer_traffic(t.memory, c.app.hub, c.key.namespace)

    @r.get("/glossary")
    def glossary(c: Caller = on) -> list[Json]:
        """The terms of ``memcurator explain`` (any key)."""
        from memcurator.glossary import GLOSSARY

        return [{"name": g.name, "text": g.text, "aliases": list(g.aliases)} for g in GLOSSARY]


__all__ = ["Caller", "RecallProbe", "inspector_router"]
