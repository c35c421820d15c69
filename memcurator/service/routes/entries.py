"""Entries of the key's namespace: ``POST /v1/write``, ``GET /v1/entries`` (a filtered page),
``GET``/``PUT``/``DELETE /v1/entries/{id}``, and the decision log ``GET /v1/decisions``.

Routes that take an entry id look it up only inside the key's namespace, and answer another
namespace's id exactly as an id that never existed (:mod:`memcurator.service.problems`).
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Query

from memcurator.errors import Forbidden
from memcurator.limits import MAX_INT
from memcurator.service.models import (
    DecisionOut,
    DecisionsPage,
    EntriesPage,
    EntryOut,
    ForgetResponse,
    UpdateRequest,
    WriteRequest,
    WriteResponse,
)
from memcurator.service.routes.deps import Key, Pool, write_out
from memcurator.trust import state
from memcurator.types import Entry

router = APIRouter()

#: a query parameter that counts from 0 (an offset, a step, a seq): a 64-bit integer
Count = Annotated[int, Query(ge=0, le=MAX_INT)]
#: a page's size
PageSize = Annotated[int, Query(ge=1, le=1000)]


@router.post("/v1/write", response_model=WriteResponse, tags=["memory"])
def write(body: WriteRequest, key: Key, pool: Pool) -> WriteResponse:
    """Offer one entry; its origin is the key's identity, signed by the service."""
    key.require("write")
    signed = pool.signature(key, body.origin, body.kind, body.text)
    with pool.using(key) as t:
        r = t.memory.write(
            body.text,
            kind=body.kind,
            raw_text=body.raw_text,
            meta=body.meta,
            user=body.user,
            personal=body.personal,
            **signed.write_kw(),
        )
        return write_out(t, r, signed.origin)


def _select(
    es: list[Entry],
    admitted: dict[str, float],
    *,
    kind: str | None,
    origin: str | None,
    user: str | None,
    steps: tuple[int | None, int | None],
    times: tuple[float | None, float | None],
) -> list[Entry]:
    """The entries that pass every given filter (None: no filter)."""
    lo, hi = _or(steps[0], -math.inf), _or(steps[1], math.inf)
    after, before = _or(times[0], -math.inf), _or(times[1], math.inf)
    return [
        e
        for e in es
        if (kind is None or e.kind == kind)
        and (origin is None or e.origin == origin)
        and (user is None or state.user_of(e) == user)
        and lo <= e.created_step <= hi
        and after <= admitted.get(e.id, -math.inf)
        and admitted.get(e.id, math.inf) <= before
    ]


def _or(value: float | None, default: float) -> float:
    """``value``, or ``default`` (an open end of a range) when it is None."""
    return default if value is None else value


@router.get("/v1/entries", response_model=EntriesPage, tags=["entries"])
def entries(
    key: Key,
    pool: Pool,
    offset: Count = 0,
    limit: PageSize = 100,
    kind: Annotated[str | None, Query(max_length=16)] = None,
    origin: Annotated[str | None, Query(max_length=16)] = None,
    user: Annotated[str | None, Query(max_length=256)] = None,
    created_from_step: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
    created_to_step: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
    admitted_after: Annotated[float | None, Query(description="Unix seconds")] = None,
    admitted_before: Annotated[float | None, Query(description="Unix seconds")] = None,
) -> EntriesPage:
    """Resident entries, oldest first, filtered by kind, origin, user and time (step, or
    unix seconds of admission from the decision log)."""
    key.require("read")
    with pool.using(key) as t:
        es = t.memory.entries()
        admitted: dict[str, float] = {}
        if admitted_after is not None or admitted_before is not None:
            admitted = {d.entry_id: d.at for d in t.memory.decisions(action="admit")}
    sel = _select(
        es,
        admitted,
        kind=kind,
        origin=origin,
        user=user,
        steps=(created_from_step, created_to_step),
        times=(admitted_after, admitted_before),
    )
    page = sel[offset : offset + limit]
    nxt = offset + limit if offset + limit < len(sel) else None
    return EntriesPage(
        total=len(sel), offset=offset, entries=[EntryOut.of(e) for e in page], next_offset=nxt
    )


@router.get("/v1/entries/{entry_id}", response_model=EntryOut, tags=["entries"])
def get_entry(entry_id: str, key: Key, pool: Pool) -> EntryOut:
    """One resident entry of the key's namespace."""
    key.require("read")
    with pool.using(key) as t:
        return EntryOut.of(t.memory.get(entry_id))


@router.put("/v1/entries/{entry_id}", response_model=WriteResponse, tags=["entries"])
def update(entry_id: str, body: UpdateRequest, key: Key, pool: Pool) -> WriteResponse:
    """Replace one entry's text, atomically, through the trust checks (``admitted`` false
    when the gate refuses the new text; the old version stays). The service signs the new
    text as the entry's origin when this key holds it; an update by a key that does not
    (an external key editing an own entry) leaves the entry unproven (tainted external)."""
    key.require("write")
    with pool.using(key) as t:
        cur = t.memory.get(entry_id)  # EntryNotFound before anything changes
        sig = None
        if cur.origin in ("self", "peer"):
            try:
                sig = pool.signature(key, cur.origin, cur.kind, body.text).signature
            except Forbidden:
                sig = None
        r = t.memory.update(entry_id, body.text, reason=body.reason, signature=sig)
        return write_out(t, r, cur.origin)


@router.delete("/v1/entries/{entry_id}", response_model=ForgetResponse, tags=["entries"])
def forget(
    entry_id: str,
    key: Key,
    pool: Pool,
    reason: Annotated[str, Query(min_length=1, max_length=1000)] = "forget requested",
) -> ForgetResponse:
    """Hard-delete one entry (a tombstone in the decision log)."""
    key.require("write")
    with pool.using(key) as t:
        f = t.memory.forget(entry_id, reason=reason)
    return ForgetResponse(ids=f.ids, freed=f.freed, erased=f.erased)


@router.get("/v1/decisions", response_model=DecisionsPage, tags=["entries"])
def decisions(
    key: Key,
    pool: Pool,
    since: Annotated[int, Query(ge=0, le=MAX_INT, description="Rows after this seq")] = 0,
    limit: PageSize = 100,
    action: Annotated[str | None, Query(max_length=16)] = None,
) -> DecisionsPage:
    """The namespace's decision log, oldest first, one page after ``since``."""
    key.require("read")
    with pool.using(key) as t:
        rows = t.memory.store.decisions(t.memory.namespace, since=since, action=action)
    page = rows[:limit]
    nxt = page[-1].seq if len(rows) > limit else None
    return DecisionsPage(decisions=[DecisionOut.of(d) for d in page], next_since=nxt)


__all__ = ["router"]
