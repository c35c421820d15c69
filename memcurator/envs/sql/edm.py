"""EDM's evaluation metrics of an SQL trajectory: PEI, FRR and TI (the bench's evaluator).

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

The policy side (the certification thresholds PEI ≥ 0.8 ∧ TI ≥ 4.0 on given numbers) is in the
core, :mod:`memcurator.value.edm`; the memory-level measures MP, MRS and CER are the benchmark's,
:mod:`memcurator.bench.edm`.

References
----------
EDM, Section 4.1.2 (Eq. 2-4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from memcurator.domains.sql.quiet import quiet_fallback
from memcurator.errors import InvalidInput


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
    score = 0.0
    score += 1.0 if task_text.strip() else 0.0
    score += 1.0 if actions and all(o.strip() for o in observations) else 0.0
    parsed = []
    ok = bool(actions)
    for a in actions:
        try:
            with quiet_fallback():
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


__all__ = ["frr", "pei", "traceability"]
