"""Task streams over the LifelongAgentBench OS tasks (``memcurator bench --env os``).

As the SQL stream (:func:`memcurator.bench.stream.build_stream`): families drawn with Zipf
popularity from a seeded permutation, an attacker event that plants poisoned exemplars for
popular target families. A family here is one task (``os007``); every draw runs that task again
in a fresh sandbox (re-instantiation with fresh literals, :mod:`memcurator.envs.os.families`,
covers the largest recurring family only and is not drawn from yet). Schema drift has no OS
counterpart yet: ``drift`` must be 0 (the CLI says so).
"""

from __future__ import annotations

import numpy as np

from memcurator.bench.stream import PoisonEvent, Stream, StreamConfig, zipf_probs
from memcurator.errors import InvalidInput
from memcurator.types import Task


def build_os_stream(cfg: StreamConfig, tasks: list) -> Stream:
    """A deterministic stream of OS tasks.

    Parameters
    ----------
    cfg : StreamConfig
        ``cfg.env`` must be ``"os"``; ``drift`` must be 0; ``payload`` one of
        :data:`memcurator.envs.os.poison.PAYLOADS`.
    tasks : list of OSTask
        The runnable tasks (:func:`memcurator.envs.os.runnable_tasks`).

    Returns
    -------
    Stream
        Each :class:`~memcurator.types.Task` carries its ``OSTask`` in ``payload["os_task"]``.

    Raises
    ------
    InvalidInput
        No tasks, or ``drift`` > 0.
    """
    from memcurator.envs.os.poison import make_os_poison

    if not tasks:
        raise InvalidInput("no OS tasks to draw from")
    if cfg.drift > 0:
        raise InvalidInput(
            "the OS stream has no drift yet (no change of convention is implemented); use "
            "--drift 0 with --env os"
        )
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(tasks))
    fams = [tasks[i] for i in order]
    if cfg.n_families is not None:
        fams = fams[: cfg.n_families]
    draws = rng.choice(len(fams), size=cfg.n_tasks, p=zipf_probs(len(fams), cfg.zipf))
    poison_step = int(round(cfg.poison_at * cfg.n_tasks))
    targets_idx: list[int] = []
    if cfg.poison > 0:
        cand = list(range(min(10, len(fams))))
        rng.shuffle(cand)
        targets_idx = sorted(cand[: cfg.poison_targets])
    out: list[Task] = []
    for t, i in enumerate(draws):
        ot = fams[int(i)]
        subset = "attacker" if int(i) in targets_idx and t >= poison_step else "clean"
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
        out, poison, drifted=set(), drift_step=cfg.n_tasks, families=[f.family for f in fams]
    )


__all__ = ["build_os_stream"]
