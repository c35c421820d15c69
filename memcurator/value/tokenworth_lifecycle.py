"""TokenWorth's worth-guided memory lifecycle as a pure decision over plain arrays.

Coverage first, then quality (TokenWorth, Sec. 4.4): while the bank has room, successful
experiences are admitted; once it is full, a candidate is admitted if it is novel enough or if its
probe-averaged worth beats the best resident by a margin with enough positive probes; failing
that, it may replace its nearest low-utility neighbour when the worth gain is large enough.
Only successful interactions create experiences (App. B.1, "Online learning configuration").

Nothing here touches a store: :func:`decide_write` returns a :class:`WriteDecision` and the caller
(a write/keep policy) applies it and logs the reason.

References
----------
TokenWorth, Sec. 4.4 and App. B.2 (``τ_nov = 0.35``, ``δ_write = 0.02``, ``τ_pos = 0.45``,
``δ_rep = 0.10``; capacity ``B_max`` = 50 on DB, 128 on ALFWorld, App. B.3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.value.tokenworth import features_many

__all__ = ["WriteDecision", "WriteParams", "decide_write", "probe_worths"]

Action = Literal["admit", "reject", "replace"]


@dataclass(frozen=True)
class WriteParams:
    """Thresholds of the admission / replacement gate (TokenWorth, App. B.2).

    Parameters
    ----------
    tau_nov : float, default 0.35
        Novelty threshold; novelty = ``1 - max cosine(candidate, resident)``.
    delta_write : float, default 0.02
        Margin by which the candidate's probe-averaged worth must exceed the best resident's.
    tau_pos : float, default 0.45
        Minimum fraction of probes on which the candidate's worth is ``> 0``.
    delta_rep : float, default 0.10
        Minimum worth gain over the replaced neighbour.
    replace_k : int, default 1
        The "nearest low-utility neighbour" is the lowest-worth resident among the ``replace_k``
        residents most cosine-similar to the candidate. The paper's exact rule was lost in
        extraction (App. B.1); 1 is the literal reading (the nearest neighbour itself).
    """

    tau_nov: float = 0.35
    delta_write: float = 0.02
    tau_pos: float = 0.45
    delta_rep: float = 0.10
    replace_k: int = 1

    def __post_init__(self) -> None:
        for name in ("tau_nov", "delta_write", "tau_pos", "delta_rep"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v)):
                raise InvalidInput(f"{name} must be a finite number, got {v!r}")
        if (
            isinstance(self.replace_k, bool)
            or not isinstance(self.replace_k, int)
            or (self.replace_k < 1)
        ):
            raise InvalidInput(f"replace_k must be a positive int, got {self.replace_k!r}")


class WriteDecision(NamedTuple):
    """Typed result of :func:`decide_write`.

    Attributes
    ----------
    action : {"admit", "reject", "replace"}
    victim_index : int or None
        Row of ``bank_embs`` to remove: the replaced neighbour for ``"replace"``; for ``"admit"``
        into a full bank the lowest-worth resident (so the count never exceeds ``capacity``);
        None otherwise.
    reason : str
        Why, in words a person can read, with the statistics compared.
    score : float
        The candidate's probe-averaged worth (same meaning for every action).
    """

    action: Action
    victim_index: int | None
    reason: str
    score: float


def _cosines(c: np.ndarray, B: np.ndarray) -> np.ndarray:
    cn = np.linalg.norm(c)
    bn = np.linalg.norm(B, axis=1)
    denom = cn * bn
    return np.divide(B @ c, denom, out=np.zeros(len(B)), where=denom > 0)


def _array(a: Any, name: str, ndim: int) -> np.ndarray:
    arr = np.array(a, dtype=np.float64)
    if arr.ndim != ndim:
        raise InvalidInput(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInput(f"{name} contains NaN or infinity")
    return arr


def decide_write(
    candidate_emb: Any,
    candidate_worths: Any,
    bank_embs: Any,
    bank_worths: Any,
    capacity: int,
    *,
    success: bool = True,
    params: WriteParams | None = None,
) -> WriteDecision:
    """Decide whether a new experience enters a bounded bank (TokenWorth, Sec. 4.4).

    Rules, in order:

    1. ``success`` is False → reject (only successful interactions create experiences).
    2. ``n < capacity`` → admit (coverage while room remains).
    3. Full bank (``n >= capacity``):

       a. novelty ``1 - max_j cos(c, b_j) >= τ_nov`` → admit, evicting the lowest-worth
          resident;
       b. ``mean(candidate_worths) >= max_j mean(bank_worths[j]) + δ_write`` and the candidate's
          positive-score ratio ``mean(candidate_worths > 0) >= τ_pos`` → admit, evicting the
          lowest-worth resident;
       c. nearest low-utility neighbour ``v`` (see ``WriteParams.replace_k``) with
          ``mean(candidate_worths) - mean(bank_worths[v]) >= δ_rep`` → replace ``v``;
       d. otherwise reject.

    Our reading of "admitted when full": the bank would exceed ``B_max``, so the decision names
    the lowest probe-averaged-worth resident as ``victim_index``; the caller evicts it. Ties go to
    the lowest index. A bank already above capacity is treated as full (one victim per call).

    Parameters
    ----------
    candidate_emb : array-like of shape (d,)
    candidate_worths : array-like of shape (p,)
        Learned worth of the candidate for each of ``p >= 1`` probe queries (e.g. the recent
        queries, including the one that produced it), in the learner's units (> 0 = helps).
    bank_embs : array-like of shape (n, d)
    bank_worths : array-like of shape (n, p) or (n,)
        Worth of each resident for the same probes; a 1-d array is read as already averaged.
    capacity : int
        ``B_max``, the most records the bank may hold (a count, not bytes).
    success : bool, default True
        Whether the interaction that produced the candidate succeeded.
    params : WriteParams, optional
        Thresholds; defaults to the paper's.

    Returns
    -------
    WriteDecision

    Raises
    ------
    InvalidInput
        On NaN, mismatched shapes, ``p == 0`` or ``capacity < 1``.

    Examples
    --------
    >>> bank = np.eye(3)                       # three orthogonal residents
    >>> worths = np.array([[0.1, 0.0], [0.5, 0.4], [0.05, 0.0]])
    >>> decide_write([1.0, 0.0, 0.0], [0.3, 0.2], bank, worths, capacity=4).action
    'admit'
    >>> d = decide_write([1.0, 0.05, 0.0], [0.3, 0.2], bank, worths, capacity=3)
    >>> d.action, d.victim_index, round(d.score, 2)
    ('replace', 0, 0.25)
    >>> decide_write([1.0, 0.0, 0.0], [0.9, 0.8], bank, worths, capacity=3, success=False).action
    'reject'
    """
    p = params if params is not None else WriteParams()
    c, cw, B, bw = _checked_inputs(
        candidate_emb, candidate_worths, bank_embs, bank_worths, capacity
    )
    worth = float(cw.mean())
    n = B.shape[0]
    if not success:
        return WriteDecision(
            "reject",
            None,
            "failed interaction: only successful interactions create experiences",
            worth,
        )
    if n < capacity:
        return WriteDecision(
            "admit", None, f"capacity remains ({n}/{capacity} used): admit for coverage", worth
        )
    return _decide_full(c, cw, B, bw, capacity, p)


def _checked_inputs(
    candidate_emb: Any, candidate_worths: Any, bank_embs: Any, bank_worths: Any, capacity: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`decide_write`'s inputs as float arrays ``(c, cw, B, bw)``, ``bw`` of shape (n, p).

    Raises
    ------
    InvalidInput
        On NaN, mismatched shapes, ``p == 0`` or ``capacity < 1``.
    """
    c = _array(candidate_emb, "candidate_emb", 1)
    cw = _array(candidate_worths, "candidate_worths", 1)
    B = _array(bank_embs, "bank_embs", 2)
    bw = np.array(bank_worths, dtype=np.float64)
    if bw.ndim == 1:
        bw = bw[:, None]
    bw = _array(bw, "bank_worths", 2)
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 1:
        raise InvalidInput(f"capacity must be a positive int, got {capacity!r}")
    if len(cw) == 0:
        raise InvalidInput("candidate_worths is empty: score the candidate on at least one probe")
    n = B.shape[0]
    if n and B.shape[1] != c.shape[0]:
        raise InvalidInput(f"bank_embs has dimension {B.shape[1]}, candidate_emb {c.shape[0]}")
    if bw.shape[0] != n:
        raise InvalidInput(f"bank_worths has {bw.shape[0]} rows for {n} residents")
    if n and bw.shape[1] not in (1, len(cw)):
        raise InvalidInput(f"bank_worths has {bw.shape[1]} probes, candidate_worths {len(cw)}")
    return c, cw, B, bw


def _decide_full(
    c: np.ndarray, cw: np.ndarray, B: np.ndarray, bw: np.ndarray, capacity: int, p: WriteParams
) -> WriteDecision:
    """Rules 3a-3d of :func:`decide_write` for a full bank (``n >= capacity``)."""
    n = B.shape[0]
    worth = float(cw.mean())
    res = bw.mean(axis=1)  # probe-averaged worth of each resident, (n,)
    cos = _cosines(c, B)
    lowest = int(np.argmin(res))
    evict = f"evict lowest-worth resident #{lowest} (worth {res[lowest]:.3f})"
    novelty = 1.0 - float(cos.max())
    if novelty >= p.tau_nov:
        return WriteDecision(
            "admit",
            lowest,
            f"bank full ({n}/{capacity}); novel: novelty "
            f"{novelty:.3f} >= tau_nov {p.tau_nov:g}; {evict}",
            worth,
        )
    best = float(res.max())
    pos = float((cw > 0).mean())
    margin = worth - best
    if margin >= p.delta_write and pos >= p.tau_pos:
        return WriteDecision(
            "admit",
            lowest,
            f"bank full ({n}/{capacity}); worth {worth:.3f} "
            f"beats best resident {best:.3f} by {margin:.3f} >= delta_write "
            f"{p.delta_write:g} with positive ratio {pos:.2f} >= tau_pos "
            f"{p.tau_pos:g}; {evict}",
            worth,
        )
    k = min(p.replace_k, n)
    near = np.argsort(-cos, kind="stable")[:k]
    victim = int(near[np.argmin(res[near])])
    gain = worth - float(res[victim])
    if gain >= p.delta_rep:
        return WriteDecision(
            "replace",
            victim,
            f"bank full ({n}/{capacity}); not novel "
            f"(novelty {novelty:.3f} < {p.tau_nov:g}); replaces near neighbour "
            f"#{victim} (cos {cos[victim]:.3f}, worth {res[victim]:.3f}): gain "
            f"{gain:.3f} >= delta_rep {p.delta_rep:g}",
            worth,
        )
    return WriteDecision(
        "reject",
        None,
        f"bank full ({n}/{capacity}); novelty {novelty:.3f} < "
        f"tau_nov {p.tau_nov:g}; worth margin over best {margin:.3f} (need >= "
        f"{p.delta_write:g}, positive ratio {pos:.2f} vs {p.tau_pos:g}); gain "
        f"over neighbour #{victim} {gain:.3f} < delta_rep {p.delta_rep:g}",
        worth,
    )


def probe_worths(
    learner: Any,
    probe_embs: Any,
    mem_embs: Any,
    stats: Sequence[Any],
    *,
    n_blocks: int = 16,
    kappa: float = 0.02,
) -> np.ndarray:
    """Worth of each memory under each probe query, for :func:`decide_write`.

    Parameters
    ----------
    learner : TokenWorthLearner or anything with ``score_many(list of dict) -> (n,)``
    probe_embs : array-like of shape (p, d)
    mem_embs : array-like of shape (n, d)
    stats : sequence of n MemoryStats (or mappings)
    n_blocks, kappa
        Passed to :func:`memcurator.value.tokenworth.features_many`; must match what the
        learner was trained on.

    Returns
    -------
    ndarray of shape (n, p)
    """
    Q = _array(probe_embs, "probe_embs", 2)
    M = _array(mem_embs, "mem_embs", 2)
    out = np.zeros((M.shape[0], Q.shape[0]))
    for j, q in enumerate(Q):
        xs = features_many(q, M, stats, n_blocks=n_blocks, kappa=kappa)
        out[:, j] = learner.score_many(xs)
    return out
