"""Record: close one task — its outcome fed back, its experience written in the form the policy
chooses, the step clock advanced and the step's energy handed to the policy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from memcurator.distill import render_insight, render_raw
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.feedback import feedback as give_feedback
from memcurator.lifecycle.write import WriteResult, sign, write
from memcurator.types import RecallResult, Task, Trajectory


def end_step(ctx: Context) -> None:
    """Advance the logical clock; hand the step's energy ε(t) to the policy (CURATOR Eq. 6)."""
    with ctx.transaction():
        ctx.policy.observe_energy(ctx.energy.end_step())
        ctx.step += 1
        ctx.save_state()


class RecordOptions(TypedDict, total=False):
    """The keyword arguments of :func:`record` (and :meth:`memcurator.Memory.record`)."""

    used: Iterable[str] | RecallResult
    feedback: bool
    derived_from: Any


def record(
    ctx: Context,
    task: Task,
    trajectory: Trajectory,
    *,
    used: Iterable[str] | RecallResult = (),
    feedback: bool = True,
    derived_from: Any = None,
) -> WriteResult | None:
    """Close one task: feed its outcome back to ``used``, then write its experience.

    The policy's form decides what is written: the raw trajectory or its distilled insight
    (``b⁰`` the raw bytes), only when the reward is at least its ``min_reward``. The
    trajectory's evaluation ``metrics`` go into the entry's ``meta``. With a keyring the write
    is signed by the owner. ``derived_from`` declares what the trajectory was derived from
    (the entries injected into its prompt, ``"entry:<id>"``, a tool's output ...): see
    :func:`memcurator.lifecycle.write.write`. Returns None when nothing was written.
    """
    if feedback:
        give_feedback(ctx, used, trajectory.reward)
    pol = ctx.policy
    if not pol.writes or trajectory.reward < pol.min_reward or not trajectory.steps:
        end_step(ctx)
        return None
    raw = render_raw(task, trajectory)
    meta: dict[str, Any] = {"task_id": task.id, "family": task.family, "solver": trajectory.solver}
    meta.update(trajectory.metrics)
    kind = "insight" if pol.form == "insight" else "raw"
    text = raw
    if kind == "insight":
        text = render_insight(task.instruction, trajectory.steps[-1].action)
    sig = None
    if ctx.keyring is not None:
        sig = sign(ctx, text, kind=kind, origin_detail=trajectory.solver)
    r = write(
        ctx,
        text,
        kind=kind,
        raw_text=raw if kind == "insight" else None,
        meta=meta,
        origin_detail=trajectory.solver,
        signature=sig,
        derived_from=derived_from,
    )
    end_step(ctx)
    return r


__all__ = ["RecordOptions", "end_step", "record"]
