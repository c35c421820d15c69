"""EDM's certification on given numbers: the thresholds of Algorithm 1 and the metrics' record.

EDM (Eval-Driven Memory) certifies a trajectory before it may persist: PEI ≥ 0.8 and TI ≥ 4.0
(Algorithm 1). The memory only reads the numbers a trajectory carries
(:class:`~memcurator.types.Trajectory.metrics`, stored in the entry's ``meta`` by
:meth:`Memory.record`); the ``edm-gate`` component (:mod:`memcurator.policy.edm`) applies the
thresholds. How the numbers are computed depends on the task domain: for SQL tasks see
:mod:`memcurator.envs.sql.edm` (PEI, FRR, TI) and, for the benchmark's memory-level measures
(MP, MRS, CER), :mod:`memcurator.bench.edm`.

References
----------
EDM, Section 4.1.2 (Eq. 2-4), Algorithm 1 (PEI ≥ 0.8 ∧ TI ≥ 4.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: PEI threshold of a certified (high-quality) trajectory (EDM, Alg. 1 and Eq. 6).
PEI_CERTIFIED = 0.8
#: TI threshold of a certified trajectory (EDM, Alg. 1, τ_trace).
TI_CERTIFIED = 4.0


@dataclass(frozen=True)
class EvalMetrics:
    """A trajectory's EDM metrics.

    Kept with the entry as metadata (:meth:`as_meta`); :func:`certified` reads PEI and TI.

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


def certified(
    pei: float, ti: float, *, min_pei: float = PEI_CERTIFIED, min_ti: float = TI_CERTIFIED
) -> bool:
    """Whether a trajectory with these metrics is certified: ``PEI ≥ min_pei`` and
    ``TI ≥ min_ti`` (EDM, Algorithm 1). A missing (NaN) metric is not certified.

    Examples
    --------
    >>> certified(1.0, 5.0), certified(0.5, 5.0), certified(1.0, float("nan"))
    (True, False, False)
    """
    if not (math.isfinite(pei) and math.isfinite(ti)):
        return False
    return pei >= min_pei and ti >= min_ti


__all__ = ["PEI_CERTIFIED", "TI_CERTIFIED", "EvalMetrics", "certified"]
