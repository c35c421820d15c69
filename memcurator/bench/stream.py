"""Task streams over recurring SQL task families, with drift and poisoning events.

A stream draws families with Zipf-like popularity; each draw is a fresh variant of its family,
executed once. At the drift boundary a fraction of the families migrate schema (their later tasks
form the *victim* subset); at the poison step an attacker writes entries crafted for target
families (their later tasks form the *attacker* subset). DESIGN.md, "The first real testbed".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.types import Task


@dataclass
class PoisonEvent:
    """Attacker entries to write before task ``step``: texts and their target families."""

    step: int
    texts: list[str]
    targets: list[str]
    payload: str


def poison_event(
    step: int,
    targets: Sequence[Any],
    n: int,
    payload: str,
    make: Callable[[Any, Any, np.random.Generator], str],
    rng: np.random.Generator,
) -> PoisonEvent | None:
    """``n`` attacker entries to write before task ``step``, round-robin over the target
    families ``targets`` (specs with a ``family``): ``make(target, payload, rng)`` each, in
    that order; None when ``n`` is 0 or there is no target."""
    if n <= 0 or not targets:
        return None
    texts, fams = [], []
    for j in range(n):
        target = targets[j % len(targets)]
        texts.append(make(target, payload, rng))
        fams.append(target.family)
    return PoisonEvent(step, texts, fams, payload)


@dataclass
class StreamConfig:
    """Parameters of a stream.

    Parameters
    ----------
    n_tasks : int
        Number of tasks N.
    zipf : float, default 1.1
        Popularity exponent a: family of rank r is drawn with probability ∝ r^-a.
    n_families : int or None, default 60
        How many variant-admitting families take part (the most popular ranks); None = all.
    drift : float, default 0.3
        Fraction of the families that have appeared before the boundary that migrate schema.
    drift_at : float, default 0.5
        Phase boundary as a fraction of the stream.
    poison : int, default 4
        n_p attacker entries (0 disables poisoning).
    poison_at : float, default 0.3
        Poison step as a fraction of the stream.
    poison_targets : int, default 2
        Number of target families (drawn among the ten most popular, none of them drifting).
    payload : {"drop", "empty", "comment"}, default "drop"
    seed : int, default 0
    dml_share : float or None, default None
        Share of the taking-part families that are table-changing (INSERT/UPDATE/DELETE), the
        rest SELECT, in a random popularity order; None draws families regardless of kind (the
        default stream, ~37% DML). Issue 11, cause 5: a held-out, mostly-DML distribution.
    drift_popular : bool, default False
        Migrate the most-drawn families before the boundary instead of random ones, so that
        drift hits families with many stale exemplars resident (and many victim tasks).
    env : {"sql", "os"}, default "sql"
        The task environment: SQL families (this module) or OS tasks
        (:func:`memcurator.bench.os_stream.build_os_stream`; ``payload`` is then one of
        :data:`memcurator.envs.os.poison.PAYLOADS`).
    os_variants : bool, default True
        ``env="os"``: every draw is a validated fresh-literal variant of its task (as every SQL
        draw is a variant of its family); False reruns the task itself at every draw. Ignored
        on SQL.
    phases : tuple of tuple of float, optional
        A workload's popularity schedule (the peer bench's workloads,
        :mod:`memcurator.bench.peers`): P weight vectors over the families *in the order given*
        to :func:`build_stream`, each used for the draws of one of P equal parts of the stream
        (the family order, ``zipf``, ``n_families`` and ``dml_share`` are then not used for the
        draws). None (default): Zipf popularity over a seeded order.
    """

    n_tasks: int = 300
    zipf: float = 1.1
    n_families: int | None = 60
    drift: float = 0.3
    drift_at: float = 0.5
    poison: int = 4
    poison_at: float = 0.3
    poison_targets: int = 2
    payload: str = "drop"
    seed: int = 0
    dml_share: float | None = None
    drift_popular: bool = False
    env: str = "sql"
    os_variants: bool = True
    phases: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        if self.n_tasks < 1:
            raise InvalidInput("n_tasks must be >= 1")
        if not 0 <= self.drift <= 1 or not 0 <= self.drift_at <= 1 or not 0 <= self.poison_at <= 1:
            raise InvalidInput("drift, drift_at and poison_at must be in [0, 1]")
        if not math.isfinite(self.zipf) or self.zipf < 0 or self.poison < 0:
            raise InvalidInput(
                f"zipf must be a finite number >= 0 and poison >= 0, got zipf={self.zipf!r}, "
                f"poison={self.poison!r}"
            )
        if self.n_families is not None and self.n_families < 1:
            raise InvalidInput("n_families must be >= 1 (or None for all)")
        if self.poison_targets < 1:
            raise InvalidInput("poison_targets must be >= 1")
        if self.dml_share is not None and not 0 <= self.dml_share <= 1:
            raise InvalidInput(f"dml_share must be in [0, 1] or None, got {self.dml_share!r}")
        if self.env not in ("sql", "os"):
            raise InvalidInput(f"env must be 'sql' or 'os', got {self.env!r}")
        if self.phases is not None:
            _check_phases(self.phases)
        if self.env == "os":
            from memcurator.envs.os.poison import PAYLOADS
        else:
            from memcurator.envs.sql import PAYLOADS  # type: ignore[assignment]

        if self.payload not in PAYLOADS:
            raise InvalidInput(f"payload must be one of {list(PAYLOADS)}, got {self.payload!r}")


def _check_phases(phases: object) -> None:
    """Refuse a popularity schedule that is not a non-empty list of non-negative finite weight
    vectors of one length, each with a positive sum (:class:`InvalidInput`)."""
    if not isinstance(phases, tuple | list) or not phases:
        raise InvalidInput("phases must be a non-empty list of weight vectors")
    lens = set()
    for w in phases:
        a = np.asarray(w, dtype=np.float64)
        if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0) or not a.sum() > 0:
            raise InvalidInput("each phase must be finite weights >= 0 with a positive sum")
        lens.add(a.size)
    if len(lens) != 1:
        raise InvalidInput(f"every phase must weigh the same families, got lengths {sorted(lens)}")


def _phase_draws(
    phases: tuple[tuple[float, ...], ...], order: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices into the permuted family list (``fams[j] = specs[order[j]]``): the draws of
    P equal parts of the stream, each from its phase's weights over the specs."""
    if len(phases[0]) != order.size:
        raise InvalidInput(f"phases weigh {len(phases[0])} families, the stream has {order.size}")
    bounds = np.linspace(0, n, len(phases) + 1).round().astype(int)
    out = []
    for w, a, b in zip(phases, bounds[:-1], bounds[1:], strict=True):
        p = np.asarray(w, dtype=np.float64)[order]
        out.append(rng.choice(order.size, size=int(b - a), p=p / p.sum()))
    return np.concatenate(out)


@dataclass
class Stream:
    """A built stream: tasks in order, the poison event, drifted families and their step.

    ``build`` says what building it did where that is not in the tasks (the OS stream: how many
    draws are fresh variants, how many fell back and why, and the sandbox checks it ran,
    :func:`memcurator.bench.os_stream.build_os_stream`); empty for SQL.
    """

    tasks: list[Task]
    poison: PoisonEvent | None
    drifted: set[str] = field(default_factory=set)
    drift_step: int = 0
    families: list[str] = field(default_factory=list)
    build: dict[str, Any] = field(default_factory=dict)


def poison_targets(n_families: int, cfg: StreamConfig, rng: np.random.Generator) -> list[int]:
    """Indices (popularity ranks) of the families the attacker targets, for every environment's
    stream: ``cfg.poison_targets`` of the ten most popular, drawn with ``rng`` (one shuffle);
    none without poisoning (``cfg.poison`` 0, ``rng`` untouched)."""
    if cfg.poison <= 0:
        return []
    cand = list(range(min(10, n_families)))
    rng.shuffle(cand)
    return sorted(cand[: cfg.poison_targets])


def planted_stream(
    tasks: list[Task],
    fams: Sequence[Any],
    targets_idx: list[int],
    drifted_idx: Iterable[int],
    cfg: StreamConfig,
    make: Callable[[Any, Any, np.random.Generator], str],
    rng: np.random.Generator,
    **kw: Any,
) -> Stream:
    """The built stream of ``tasks`` drawn from the families ``fams`` (each with a ``family``),
    for every environment: the attacker's entries (``make``, :func:`poison_event`) planted
    before the poison step on the targets ``targets_idx``, the families ``drifted_idx``
    marked drifted; ``kw`` the rest of :class:`Stream` (``drift_step``, ``build``)."""
    poison_step = int(round(cfg.poison_at * cfg.n_tasks))
    targets = [fams[i] for i in targets_idx]
    poison = poison_event(poison_step, targets, cfg.poison, cfg.payload, make, rng)
    drifted = {fams[i].family for i in drifted_idx}
    return Stream(tasks, poison, drifted=drifted, families=[f.family for f in fams], **kw)


def zipf_probs(n: int, a: float) -> np.ndarray:
    """Probabilities ∝ r^-a for ranks r = 1..n, shape (n,).

    Examples
    --------
    >>> zipf_probs(3, 1.0).round(3).tolist()
    [0.545, 0.273, 0.182]
    """
    w = 1.0 / np.arange(1, n + 1) ** a
    return w / w.sum()


def _by_kind_share(fams: list, share: float, n: int | None, seed: int) -> list:
    """``n`` families (all if None), ``round(share·n)`` of them table-changing, in a random order
    drawn from a generator of its own (the stream's draws stay those of its seed)."""
    n = len(fams) if n is None else min(n, len(fams))
    dml = [f for f in fams if f.kind != "select"]
    sel = [f for f in fams if f.kind == "select"]
    k = min(int(round(share * n)), len(dml))
    chosen = dml[:k] + sel[: n - k]
    if len(chosen) < n:  # too few SELECT families: fill with more DML
        chosen += dml[k : k + n - len(chosen)]
    perm = np.random.default_rng([seed, 11]).permutation(len(chosen))
    return [chosen[i] for i in perm]


def build_stream(cfg: StreamConfig, specs: list, *, max_variant_tries: int = 10) -> Stream:
    """Build a deterministic stream of SQL tasks from base specs.

    Parameters
    ----------
    cfg : StreamConfig
    specs : list of SQLTaskSpec
        Families that admit variants (see :func:`memcurator.envs.sql.variant_families`).

    Returns
    -------
    Stream

    Raises
    ------
    InvalidInput
        If ``specs`` is empty.
    """
    from memcurator.envs.sql import make_poison, make_variant, migrate, to_task

    if not specs:
        raise InvalidInput("no task families to draw from")
    rng = np.random.default_rng(cfg.seed)
    fams = list(specs)
    order = rng.permutation(len(fams))
    fams = [fams[i] for i in order]
    if cfg.phases is not None:  # a workload's schedule over the specs as given
        draws = _phase_draws(cfg.phases, order, cfg.n_tasks, rng)
    else:
        if cfg.dml_share is not None:
            fams = _by_kind_share(fams, cfg.dml_share, cfg.n_families, cfg.seed)
        if cfg.n_families is not None:
            fams = fams[: cfg.n_families]
        probs = zipf_probs(len(fams), cfg.zipf)
        draws = rng.choice(len(fams), size=cfg.n_tasks, p=probs)
    drift_step = int(round(cfg.drift_at * cfg.n_tasks))
    poison_step = int(round(cfg.poison_at * cfg.n_tasks))

    seen_before = sorted({int(i) for i in draws[:drift_step]})
    n_drift = int(round(cfg.drift * len(seen_before)))
    targets_idx = poison_targets(len(fams), cfg, rng)
    drift_pool = [i for i in seen_before if i not in targets_idx]
    if cfg.drift_popular:
        counts = np.bincount(draws[:drift_step], minlength=len(fams))
        by_use = sorted(drift_pool, key=lambda i: (-counts[i], i))
        drift_idx = set(by_use[: min(n_drift, len(drift_pool))])
    else:
        drift_idx = (
            set(rng.choice(drift_pool, size=min(n_drift, len(drift_pool)), replace=False).tolist())
            if drift_pool and n_drift
            else set()
        )
    migrated = {
        i: migrate(fams[i], kind="column" if rng.random() < 0.5 else "table", rng=rng)
        for i in sorted(drift_idx)
    }

    tasks: list[Task] = []
    for t, i in enumerate(draws):
        i = int(i)
        base = migrated[i] if (i in migrated and t >= drift_step) else fams[i]
        spec = None
        for _ in range(max_variant_tries):
            spec = make_variant(base, rng)
            if spec is not None:
                break
        if spec is None:
            spec = base
        if i in migrated and t >= drift_step:
            subset = "victim"
        elif i in targets_idx and t >= poison_step and cfg.poison > 0:
            subset = "attacker"
        else:
            subset = "clean"
        tasks.append(to_task(spec, f"t{t:05d}-{spec.family}", subset))  # type: ignore[arg-type]

    return planted_stream(
        tasks, fams, targets_idx, drift_idx, cfg, make_poison, rng, drift_step=drift_step
    )
