"""EDM's memory-level measures, reported for every policy by the benchmark (Section 5.2).

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

The per-trajectory metrics these read (PEI, FRR, TI) are computed by the SQL environment's
evaluator, :mod:`memcurator.envs.sql.edm`.

References
----------
EDM, Section 5.2 (Eq. 6-8).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.value.edm import PEI_CERTIFIED


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


__all__ = ["cycle_means", "memory_precision", "retention_stability"]
