"""``POST /v1/feedback`` (a task's outcome for what it used) and ``POST /v1/record`` (close a
task: feedback, then its experience written)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from memcurator.errors import Forbidden, InvalidInput
from memcurator.service.models import FeedbackRequest, RecordRequest, RecordResponse
from memcurator.service.routes.deps import Key, Pool, write_out
from memcurator.service.tenants import Tenant
from memcurator.types import Step, Task, Trajectory

router = APIRouter(tags=["memory"])


def used_of(t: Tenant, used: list[str] | None, recall_id: str | None) -> Any:
    """The entries a feedback is for: the kept recall ``recall_id`` or the ids ``used``.

    Raises
    ------
    InvalidInput
        Neither or both given.
    EntryNotFound
        An unknown or expired ``recall_id``.
    """
    if (used is None) == (recall_id is None):
        if used is None:
            raise InvalidInput("give recall_id (the recall injected) or used (entry ids)")
        raise InvalidInput("give recall_id or used, not both")
    return t.recalled(recall_id) if recall_id is not None else used


@router.post("/v1/feedback", status_code=204)
def feedback(body: FeedbackRequest, key: Key, pool: Pool) -> Response:
    """A task's outcome for the entries injected into it."""
    key.require("write")
    with pool.using(key) as t:
        t.memory.feedback(used_of(t, body.used, body.recall_id), body.reward)
    return Response(status_code=204)


def _task_of(body: RecordRequest) -> tuple[Task, Trajectory]:
    task = Task(body.task.id, body.task.instruction, body.task.family)
    traj = Trajectory(
        body.task.id,
        [Step(s.observation, s.action) for s in body.trajectory.steps],
        reward=body.trajectory.reward,
        solver=body.trajectory.solver,
        metrics=dict(body.trajectory.metrics),
    )
    return task, traj


@router.post("/v1/record", response_model=RecordResponse)
def record(body: RecordRequest, key: Key, pool: Pool) -> RecordResponse:
    """Close one task: feedback, then its experience written as the owner's (self keys)."""
    key.require("write")
    if key.origin != "self":
        raise Forbidden(
            f"record writes the namespace's own experience; this key writes as {key.origin!r}"
        )
    task, traj = _task_of(body)
    with pool.using(key) as t:
        used: Any = body.used
        if body.recall_id is not None:
            used = used_of(t, None, body.recall_id)
        r = t.memory.record(task, traj, used=used, feedback=body.feedback)
        return RecordResponse(written=None if r is None else write_out(t, r, "self"))


__all__ = ["router", "used_of"]
