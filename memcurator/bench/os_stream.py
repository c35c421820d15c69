"""Task streams over the LifelongAgentBench OS tasks (``memcurator bench --env os``).

As the SQL stream (:func:`memcurator.bench.stream.build_stream`): families drawn with Zipf
popularity from a seeded permutation, an attacker event that plants poisoned exemplars for
popular target families. A family is one task (``os007``) and, as on SQL, **every draw is a
fresh variant of it** (:func:`memcurator.envs.os.families.reinstantiate`: new user, group,
path and file literals, consistently in instruction, init, check and reference) that passed
the generator's validity rule in the sandbox (the check fails after init and passes after the
reference). A draw with no valid variant in :data:`VARIANT_TRIES` candidates, or of a task
that names no literal to rename, runs the original task instead, and :attr:`Stream.build`
counts each such fallback with its reason; no draw is ever a variant that was not checked.

Drift is a change of convention (:mod:`memcurator.envs.os.drift`: the log directory moves,
group names get a prefix): at the boundary a fraction ``drift`` of the families seen before
it migrate, each to a change that passes the validity rule and makes its pre-drift reference
fail; their later tasks are the *victim* subset, as in the SQL stream. A victim draw is a fresh
variant of the original task with the family's change applied on top (renaming the migrated
task instead would rename ``grp_devteam`` to a name without the prefix, undoing the change);
it is kept only if it is valid **and** the variant's own pre-drift reference fails it (a
victim must make old exemplars wrong), else the draw falls back to the migrated task.

Cost: a variant's check is two sandboxes (about 1 s), a victim's three. Verdicts are cached on
disk by content (:class:`~memcurator.envs.os.validity_cache.VerdictCache`), so a rebuilt
stream (another policy list, a resumed run, the next bench on the same seeds) runs no sandbox.
Each draw's generator is seeded by ``(seed, 23, draw)``, apart from the stream's own, so the
families, popularity, poison targets and drift choices are those of the stream without
variants, and a draw's variant does not depend on the draws before it.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from memcurator.bench.stream import (
    Stream,
    StreamConfig,
    planted_stream,
    poison_targets,
    zipf_probs,
)
from memcurator.errors import InvalidInput
from memcurator.types import Task

#: Candidates tried per draw before it falls back to the original task.
VARIANT_TRIES = 3
#: Fallback reasons, as :attr:`Stream.build` ``["fallbacks"]`` counts them.
FALLBACK_REASONS = {
    "no-literal": "the task names no user, group, file or path literal to rename",
    "invalid": f"no candidate of {VARIANT_TRIES} passed the validity rule in the sandbox",
    "no-victim": f"no candidate of {VARIANT_TRIES} stayed valid under the family's convention "
    "change with its own pre-drift reference failing it",
}


def build_os_stream(
    cfg: StreamConfig,
    tasks: list,
    *,
    cache: Any = "default",
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> Stream:
    """A deterministic stream of OS tasks, each draw a validated fresh-literal variant.

    Parameters
    ----------
    cfg : StreamConfig
        ``cfg.env`` must be ``"os"``; ``payload`` one of
        :data:`memcurator.envs.os.poison.PAYLOADS`. With ``drift`` > 0 the candidates are
        migrated in the sandbox (about 1 s each; a family without a valid change is skipped
        and the next candidate tried, so fewer may drift than asked when few qualify). With
        ``os_variants`` False every draw reruns its task (the stream before variants).
    tasks : list of OSTask
        The runnable tasks (:func:`memcurator.envs.os.runnable_tasks`).
    cache : VerdictCache, str, path or None, default "default"
        Where sandbox verdicts are kept: ``"default"`` is
        :func:`~memcurator.envs.os.validity_cache.default_cache_dir`, a path another folder,
        None memory only (every verdict is run in the sandbox).
    progress : callable, optional
        ``progress(done, total, build)`` after each draw (``build`` as :attr:`Stream.build`).

    Returns
    -------
    Stream
        Each :class:`~memcurator.types.Task` carries its ``OSTask`` in ``payload["os_task"]``
        and in ``payload["variant"]`` ``"fresh"``, ``"fallback:<reason>"`` (a key of
        :data:`FALLBACK_REASONS`) or ``"off"``. ``build`` holds ``draws``, ``variants``,
        ``fallbacks`` (reason → draws), ``sandbox_checks`` (verdicts run), ``cached_checks``
        (verdicts read from the cache) and ``seconds`` (wall clock of the variant draws).

    Raises
    ------
    InvalidInput
        No tasks.
    SandboxUnavailable
        ``drift`` > 0, or variants whose verdicts are not cached, on a host without the
        sandbox.
    """
    from memcurator.envs.os.poison import make_os_poison
    from memcurator.envs.os.validity_cache import VerdictCache, default_cache_dir

    if not tasks:
        raise InvalidInput("no OS tasks to draw from")
    if isinstance(cache, VerdictCache):
        verdicts = cache
    else:
        verdicts = VerdictCache(default_cache_dir() if cache == "default" else cache)
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(tasks))
    fams = [tasks[i] for i in order]
    if cfg.n_families is not None:
        fams = fams[: cfg.n_families]
    draws = rng.choice(len(fams), size=cfg.n_tasks, p=zipf_probs(len(fams), cfg.zipf))
    poison_step = int(round(cfg.poison_at * cfg.n_tasks))
    drift_step = int(round(cfg.drift_at * cfg.n_tasks))
    targets_idx = poison_targets(len(fams), cfg, rng)
    migrated = (
        _migrations(cfg, fams, draws, drift_step, targets_idx, rng, verdicts) if cfg.drift else {}
    )
    fallbacks: Counter[str] = Counter()
    build: dict[str, Any] = {"draws": 0, "variants": 0, "fallbacks": fallbacks}
    checks0 = (verdicts.misses, verdicts.hits)
    t0 = time.monotonic()
    out: list[Task] = []
    for t, i in enumerate(draws):
        base = fams[int(i)]
        victim = int(i) in migrated and t >= drift_step
        if victim:
            subset = "victim"
        elif int(i) in targets_idx and t >= poison_step:
            subset = "attacker"
        else:
            subset = "clean"
        if not cfg.os_variants:
            ot, how = (migrated[int(i)].task if victim else base), "off"
        else:
            draw_rng = np.random.default_rng([cfg.seed, 23, t])
            kind = migrated[int(i)].kind if victim else None
            got, reason = _variant(base, kind, draw_rng, verdicts)
            if got is not None:
                ot, how = got, "fresh"
                build["variants"] += 1
            else:
                ot, how = (migrated[int(i)].task if victim else base), f"fallback:{reason}"
                fallbacks[reason] += 1
        build["draws"] += 1
        out.append(
            Task(
                f"t{t:05d}-{ot.family}",
                ot.instruction,
                ot.family,
                {"os_task": ot, "variant": how},
                subset,  # type: ignore[arg-type]
            )
        )
        if progress is not None:
            build.update(_counts(verdicts, checks0, t0))
            progress(t + 1, len(draws), build)
    build.update(_counts(verdicts, checks0, t0))
    build["fallbacks"] = dict(sorted(fallbacks.items()))
    return planted_stream(
        out, fams, targets_idx, migrated, cfg, make_os_poison, rng,
        drift_step=drift_step if migrated else cfg.n_tasks,
        build=build,
    )  # fmt: skip


def _counts(verdicts: Any, checks0: tuple[int, int], t0: float) -> dict[str, Any]:
    return {
        "sandbox_checks": verdicts.misses - checks0[0],
        "cached_checks": verdicts.hits - checks0[1],
        "seconds": round(time.monotonic() - t0, 3),
    }


def _variant(
    base: Any, kind: str | None, rng: np.random.Generator, verdicts: Any
) -> tuple[Any, str]:
    """(variant, "") or (None, reason): a validated fresh variant of ``base``, under the
    convention change ``kind`` when it is a drift victim's."""
    from memcurator.envs.os.drift import change_convention
    from memcurator.envs.os.families import reinstantiate

    for _ in range(VARIANT_TRIES):
        v = reinstantiate(base, rng)
        if v is None:
            return None, "no-literal"
        if kind is None:
            if verdicts.valid(v):
                return v, ""
            continue
        m = change_convention(v, kind)
        if m is not None and verdicts.valid(m) and verdicts.old_solution_fails(m, v.reference):
            return m, ""
    return None, ("invalid" if kind is None else "no-victim")


def stderr_progress(label: str) -> Callable[[int, int, dict[str, Any]], None]:
    """A ``progress`` for :func:`build_os_stream` that prints a line to stderr per tenth of
    the draws once the build has taken more than 2 s (a warm cache prints nothing), and a
    summary line at the end."""

    def show(done: int, total: int, build: dict[str, Any]) -> None:
        every = max(1, total // 10)
        slow = build.get("seconds", 0.0) > 2.0
        if done == total or (slow and done % every == 0):
            fb = build["fallbacks"]
            why = ", ".join(f"{k} {v}" for k, v in sorted(fb.items())) or "none"
            print(
                f"{label}: {done}/{total} draws, {build['variants']} fresh variants, "
                f"{sum(fb.values())} fell back ({why}), "
                f"{build['sandbox_checks']} sandbox checks, {build['cached_checks']} cached, "
                f"{build['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    return show


def _migrations(
    cfg: StreamConfig,
    fams: list,
    draws: np.ndarray,
    drift_step: int,
    targets_idx: list[int],
    rng: np.random.Generator,
    verdicts: Any = None,
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
        m = migrate(fams[i], kinds, cache=verdicts)
        if m is not None:
            out[i] = m
    return out


__all__ = ["FALLBACK_REASONS", "VARIANT_TRIES", "build_os_stream", "stderr_progress"]
