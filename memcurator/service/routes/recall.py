"""``POST /v1/recall``: up to ``k`` entries for a query, filtered by ``where`` conditions."""

from __future__ import annotations

from fastapi import APIRouter

from memcurator.service.filters import compile_where
from memcurator.service.models import EntryOut, RecallRequest, RecallResponse
from memcurator.service.routes.deps import Key, Pool

router = APIRouter(tags=["memory"])


@router.post("/v1/recall", response_model=RecallResponse)
def recall(body: RecallRequest, key: Key, pool: Pool) -> RecallResponse:
    """Up to ``k`` entries for ``query``, filtered by ``where`` conditions (data, not code)."""
    key.require("read")
    where = compile_where(body.where)
    with pool.using(key) as t:
        r = t.memory.recall(
            body.query,
            k=body.k,
            where=where,
            min_score=body.min_score,
            user=body.user,
            observe=body.observe,
        )
        rid = t.remember(r)
    return RecallResponse(
        recall_id=rid,
        ids=list(r.ids),
        scores=[float(s) for s in r.scores],
        entries=[EntryOut.of(e) for e in r.entries],
        step=r.step,
    )


__all__ = ["router"]
