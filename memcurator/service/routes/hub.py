"""The peers' hub (:mod:`memcurator.service.hub`), peer scope: push, pull, and query sketches.

The sender is the key's name and the group the key's namespace; nothing in the request names
either.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memcurator.limits import MAX_INT
from memcurator.service.models import (
    HubMessage,
    HubPull,
    HubPush,
    HubPushResponse,
    SharedEntryOut,
    SketchIn,
    SketchOut,
)
from memcurator.service.routes.deps import HubDep, Key

router = APIRouter(tags=["hub"])


@router.post("/v1/hub/push", response_model=HubPushResponse)
def hub_push(body: HubPush, key: Key, hub: HubDep) -> HubPushResponse:
    """Push shared entries and forget notices to the key's peer group (peer scope); the
    sender is the key's name, the group the key's namespace."""
    key.require("peer")
    seq = hub.push(
        key.namespace,
        key.name,
        to=body.to,
        round=body.round,
        entries=[e.model_dump() for e in body.entries],
        notices=list(body.notices),
    )
    return HubPushResponse(
        seq=seq, sender=key.name, entries=len(body.entries), notices=len(body.notices)
    )


@router.get("/v1/hub/pull", response_model=HubPull)
def hub_pull(
    key: Key,
    hub: HubDep,
    since: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_INT,
            description="The last seq already pulled; omitted: where this peer's last pull "
            "ended (kept by the hub, through any replica)",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> HubPull:
    """What other peers of the key's group pushed after ``since``, for this peer (peer
    scope), oldest first; never the caller's own pushes, never another group's. Without
    ``since``, from where this peer's last pull ended (the hub keeps the cursor; a peer that
    never pulled starts at the oldest kept message); every pull moves that cursor to
    ``next_since``."""
    key.require("peer")
    msgs, nxt = hub.pull(key.namespace, key.name, since, limit)
    return HubPull(
        messages=[
            HubMessage(
                seq=m.seq,
                sender=m.sender,
                to=m.to,
                round=m.round,
                entries=[SharedEntryOut(**e) for e in m.entries],
                notices=m.notices,
            )
            for m in msgs
        ],
        next_since=nxt,
    )


@router.put("/v1/hub/sketch", status_code=204)
def hub_sketch(body: SketchIn, key: Key, hub: HubDep) -> Response:
    """Publish this peer's query sketch to its group (peer scope)."""
    key.require("peer")
    hub.set_sketch(key.namespace, key.name, body.round, body.sketch)
    return Response(status_code=204)


@router.get("/v1/hub/sketches", response_model=dict[str, SketchOut])
def hub_sketches(
    key: Key,
    hub: HubDep,
    min_round: Annotated[
        int, Query(ge=0, le=MAX_INT, description="Only sketches of this round on")
    ] = 0,
    peer: Annotated[
        list[str] | None, Query(max_length=64, description="Only these peers (repeat)")
    ] = None,
) -> dict[str, SketchOut]:
    """The last sketch of each peer in the key's group, by peer name (peer scope); a peer
    waiting for a round asks for the ones it still lacks (``min_round``, ``peer``)."""
    key.require("peer")
    want = None if peer is None else set(peer)
    return {
        p: SketchOut(round=r, sketch=s)
        for p, (r, s) in hub.sketches(key.namespace).items()
        if r >= min_round and (want is None or p in want)
    }


__all__ = ["router"]
