"""EDM's evaluation metrics of a trajectory, and its memory-level measures, for SQL tasks.

EDM (Eval-Driven Memory) certifies a trajectory before it may persist. How each metric is
computed on this project's SQL testbed (the paper leaves the evaluator open: HB-Eval):

PEI, the Planning Efficiency Index (Eq. 2): ``PEI = L_min / L_actual × QF``.
    ``L_actual`` is the number of SQL statements the persisted trajectory executed: every
    attempt of the solver, failed ones included (with ``--max-turns T`` a local agent may try up
    to T times). When the local agent fails and the task escalates, the persisted trajectory is
    the expert's (one statement); the agent's failed attempts are not part of it.
    ``L_min = 1``: every task's reference solution is one statement. ``QF`` is the quality
    factor from the execution check: 1 when the final statement's result matches the ground
    truth, else 0 (the checker is binary; a partial-credit QF would need a graded checker).
FRR, the Failure Resilience Rate (Eq. 3): 1.0 if the trajectory recovered from an execution
    failure within 2 steps, 0.5 if after 2 steps, 0.0 if it never recovered; a trajectory with
    no failure has nothing to recover from and scores 1.0.
TI, the Traceability Index (Eq. 4): the paper uses an LLM judge over reasoning and actions; here
    a deterministic 0-5 rubric over what the trajectory records stands in for it (one point
    each): the task text is recorded; an observation (schema or execution feedback) precedes
    every action; every action is one statement that parses (sqlglot); the final action names
    only tables and columns of the observed schema; the outcome was verified by execution.

Memory-level measures (Section 5.2), reported for every policy by the benchmark:

MP, memory precision (Eq. 6): of the entries injected into prompts, the fraction whose PEI is
    at least 0.8. An entry without an evaluation (a poisoned or external write) counts as not
    certified.
MRS, memory retention stability (Eq. 7): the standard deviation, over C consecutive cycles of
    the stream (default 5), of the mean PEI of the agent's own episodes in each cycle (PEI of a
    task the local agent did not solve is 0). On a learning stream a rising curve raises MRS as
    much as a regression does: read it next to the per-cycle means.
CER, cognitive efficiency ratio (Eq. 8): steps per task of a policy over steps per task of a
    baseline run on the same stream (``no-memory`` when present, else ``keep-all``); a step is a
    statement the local agent executed, plus one for an escalation to the expert.

References
----------
EDM, Section 4.1.2 (Eq. 2-4), Algorithm 1 (PEI ≥ 0.8 ∧ TI ≥ 4.0), Section 5.2 (Eq. 6-8).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memcurator.errors import InvalidInput

#: PEI threshold of a certified (high-quality) trajectory (EDM, Alg. 1 and Eq. 6).
PEI_CERTIFIED = 0.8


@dataclass(frozen=True)
class EvalMetrics:
    """A trajectory's EDM metrics.

    Attributes
    ----------
    pei : float in [0, 1]
    frr : float in {0, 0.5, 1}
    ti : float in [0, 5]
    l_actual : int
        Statements executed by the persisted trajectory.
    """

    pei: float
    frr: float
    ti: float
    l_actual: int

    def as_meta(self) -> dict[str, float]:
        """The metrics as JSON-able entry metadata (``pei``, ``frr``, ``ti``, ``l_actual``)."""
        return {"pei": self.pei, "frr": self.frr, "ti": self.ti, "l_actual": self.l_actual}


def pei(l_actual: int, qf: float, l_min: int = 1) -> float:
    """Planning Efficiency Index ``L_min / L_actual × QF`` (EDM, Eq. 2).

    Raises
    ------
    InvalidInput
        ``l_actual < 1``, ``l_min < 1`` or ``qf`` outside [0, 1].

    Examples
    --------
    >>> pei(1, 1.0), pei(2, 1.0), pei(3, 0.0)
    (1.0, 0.5, 0.0)
    """
    if l_actual < 1 or l_min < 1:
        raise InvalidInput(f"need l_actual >= 1 and l_min >= 1, got {l_actual}, {l_min}")
    if not (math.isfinite(qf) and 0.0 <= qf <= 1.0):
        raise InvalidInput(f"qf must be in [0, 1], got {qf!r}")
    return min(1.0, l_min / l_actual) * float(qf)


def frr(failed: Sequence[bool]) -> float:
    """Failure Resilience Rate of a sequence of step outcomes (True = that step failed; EDM Eq. 3).

    Examples
    --------
    >>> frr([False]), frr([True, False]), frr([True, True, True, False]), frr([True, True])
    (1.0, 1.0, 0.5, 0.0)
    """
    if not any(failed):
        return 1.0
    first = next(i for i, f in enumerate(failed) if f)
    after = [i for i in range(first + 1, len(failed)) if not failed[i]]
    if not after:
        return 0.0
    return 1.0 if after[0] - first <= 2 else 0.5


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def traceability(
    task_text: str,
    observations: Sequence[str],
    actions: Sequence[str],
    schema_names: set[str],
    verified: bool,
) -> float:
    """The 0-5 traceability rubric that stands in for EDM's LLM judge (Eq. 4); see the module.

    Parameters
    ----------
    task_text : str
    observations, actions : sequence of str, same length
        The trajectory's (observation, action) steps.
    schema_names : set of str
        Lower-cased table and column names of the observed schema.
    verified : bool
        Whether the outcome was checked by execution.

    Examples
    --------
    >>> traceability("count rows", ["Table t(a INT)"], ["SELECT COUNT(a) FROM t;"], {"t", "a"},
    ...              True)
    5.0
    >>> traceability("count rows", ["Table t(a INT)"], ["SELEKT a FROM"], {"t", "a"}, False)
    2.0
    """
    import sqlglot
    from sqlglot import exp

    score = 0.0
    score += 1.0 if task_text.strip() else 0.0
    score += 1.0 if actions and all(o.strip() for o in observations) else 0.0
    parsed = []
    ok = bool(actions)
    for a in actions:
        try:
            stmts = [s for s in sqlglot.parse(a, read="sqlite") if s is not None]
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
            ok = False
            break
        if len(stmts) != 1:
            ok = False
            break
        parsed.append(stmts[0])
    score += 1.0 if ok else 0.0
    if ok and parsed:
        last = parsed[-1]
        names = {t.name.lower() for t in last.find_all(exp.Table)}
        names |= {c.name.lower() for c in last.find_all(exp.Column)}
        aliases = {a.alias.lower() for a in last.find_all(exp.Alias) if a.alias}
        score += 1.0 if names - aliases <= schema_names else 0.0
    score += 1.0 if verified else 0.0
    return score


def memory_precision(injected_pei: Sequence[float]) -> float:
    """MP (EDM Eq. 6): fraction of injected entries with PEI ≥ 0.8; NaN (no evaluation) counts
    as not certified. NaN when nothing was injected.

    Examples
    --------
    >>> memory_precision([1.0, 0.5, float("nan"), 0.9])
    0.5
    """
    x = np.asarray(injected_pei, dtype=np.float64)
    if x.size == 0:
        return float("nan")
    return float(np.mean(np.nan_to_num(x, nan=0.0) >= PEI_CERTIFIED))


def cycle_means(values: Sequence[float], cycles: int = 5) -> list[float]:
    """Means of ``values`` over ``cycles`` consecutive, nearly equal parts of the stream.

    Raises
    ------
    InvalidInput
        ``cycles < 1``.
    """
    if cycles < 1:
        raise InvalidInput(f"cycles must be >= 1, got {cycles}")
    parts = np.array_split(np.asarray(values, dtype=np.float64), cycles)
    return [float(np.mean(p)) if p.size else float("nan") for p in parts]


def retention_stability(values: Sequence[float], cycles: int = 5) -> float:
    """MRS (EDM Eq. 7): population sd of the per-cycle mean PEI.

    Examples
    --------
    >>> retention_stability([1, 1, 0, 0, 1, 1, 0, 0, 1, 1], cycles=5)
    0.48989794855663565
    """
    m = np.asarray([v for v in cycle_means(values, cycles) if math.isfinite(v)])
    return float(np.std(m)) if m.size else float("nan")


__all__ = [
    "PEI_CERTIFIED",
    "EvalMetrics",
    "cycle_means",
    "frr",
    "memory_precision",
    "pei",
    "retention_stability",
    "traceability",
]
