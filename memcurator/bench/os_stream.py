"""Task streams over the LifelongAgentBench OS tasks (``memcurator bench --env os``).

As the SQL stream (:func:`memcurator.bench.stream.build_stream`): families drawn with Zipf
popularity from a seeded permutation, an attacker event that plants poisoned exemplars for
popular target families. A family here is one task (``os007``); every draw runs that task again
in a fresh sandbox (re-instantiation with fresh literals, :mod:`memcurator.envs.os.families`,
is not drawn from yet). Drift is a change of convention (:mod:`memcurator.envs.os.drift`: the
log directory moves, group names get a prefix): at the boundary a fraction ``drift`` of the
families seen before it migrate, each to a change that passes the validity rule and makes its
pre-drift reference fail; their later tasks are the *victim* subset, as in the SQL stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memcurator.bench.stream import PoisonEvent, Stream, StreamConfig, zipf_probs
from memcurator.errors import InvalidInput
from memcurator.types import Task


def build_os_stream(cfg: StreamConfig, tasks: list) -> Stream:
    """A deterministic stream of OS tasks.

    Parameters
    ----------
    cfg : StreamConfig
        ``cfg.env`` must be ``"os"``; ``payload`` one of
        :data:`memcurator.envs.os.poison.PAYLOADS`. With ``drift`` > 0 the candidates are
        migrated in the sandbox (about 1 s each; a family without a valid change is skipped
        and the next candidate tried, so fewer may drift than asked when few qualify).
    tasks : list of OSTask
        The runnable tasks (:func:`memcurator.envs.os.runnable_tasks`).

    Returns
    -------
    Stream
        Each :class:`~memcurator.types.Task` carries its ``OSTask`` in ``payload["os_task"]``.

    Raises
    ------
    InvalidInput
        No tasks.
    SandboxUnavailable
        ``drift`` > 0 on a host without the sandbox.
    """
    from memcurator.envs.os.poison import make_os_poison

    if not tasks:
        raise InvalidInput("no OS tasks to draw from")
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(tasks))
    fams = [tasks[i] for i in order]
    if cfg.n_families is not None:
        fams = fams[: cfg.n_families]
    draws = rng.choice(len(fams), size=cfg.n_tasks, p=zipf_probs(len(fams), cfg.zipf))
    poison_step = int(round(cfg.poison_at * cfg.n_tasks))
    drift_step = int(round(cfg.drift_at * cfg.n_tasks))
    targets_idx: list[int] = []
    if cfg.poison > 0:
        cand = list(range(min(10, len(fams))))
        rng.shuffle(cand)
        targets_idx = sorted(cand[: cfg.poison_targets])
    migrated = _migrations(cfg, fams, draws, drift_step, targets_idx, rng) if cfg.drift else {}
    out: list[Task] = []
    for t, i in enumerate(draws):
        ot = fams[int(i)]
        if int(i) in migrated and t >= drift_step:
            ot, subset = migrated[int(i)].task, "victim"
        elif int(i) in targets_idx and t >= poison_step:
            subset = "attacker"
        else:
            subset = "clean"
        out.append(
            Task(f"t{t:05d}-{ot.family}", ot.instruction, ot.family, {"os_task": ot}, subset)  # type: ignore[arg-type]
        )
    poison = None
    if cfg.poison > 0 and targets_idx:
        texts, targets = [], []
        for j in range(cfg.poison):
            target = fams[targets_idx[j % len(targets_idx)]]
            texts.append(make_os_poison(target, cfg.payload, rng))
            targets.append(target.family)
        poison = PoisonEvent(poison_step, texts, targets, cfg.payload)
    return Stream(
        out,
        poison,
        drifted={fams[i].family for i in migrated},
        drift_step=drift_step if migrated else cfg.n_tasks,
        families=[f.family for f in fams],
    )


def _migrations(
    cfg: StreamConfig,
    fams: list,
    draws: np.ndarray,
    drift_step: int,
    targets_idx: list[int],
    rng: np.random.Generator,
) -> dict[int, Any]:
    """Family index → its validated :class:`~memcurator.envs.os.drift.Migration`.

    As the SQL stream: ``round(drift × families seen before the boundary)`` of them, poison
    targets excluded, chosen at random (``drift_popular``: most drawn first); each tries the
    convention changes in a random order, and a family no change fits is passed over for the
    next candidate.
    """
    from memcurator.envs.os.drift import DRIFT_KINDS, migrate

    seen_before = sorted({int(i) for i in draws[:drift_step]})
    n_drift = int(round(cfg.drift * len(seen_before)))
    pool = [i for i in seen_before if i not in targets_idx]
    if not pool or not n_drift:
        return {}
    if cfg.drift_popular:
        counts = np.bincount(draws[:drift_step], minlength=len(fams))
        order = sorted(pool, key=lambda i: (-counts[i], i))
    else:
        order = [pool[int(j)] for j in rng.permutation(len(pool))]
    out: dict[int, Any] = {}
    for i in order:
        if len(out) >= n_drift:
            break
        kinds = tuple(DRIFT_KINDS[int(j)] for j in rng.permutation(len(DRIFT_KINDS)))
        m = migrate(fams[i], kinds)
        if m is not None:
            out[i] = m
    return out


__all__ = ["build_os_stream"]
