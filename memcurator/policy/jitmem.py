"""JitMem's write gate as an admit component: ``judge-gate``.

References
----------
JitMem, Sec. 3 ("Memory Bank"): "we use the executor model as LLM-as-judge to gate which
trajectories enter the bank"; the judge's verdict is computed by the agent loop
(:func:`memcurator.curate.llm.judge`) and travels in the entry's ``meta``.
"""

from __future__ import annotations

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Verdict
from memcurator.policy.components import Component
from memcurator.types import Entry


class JudgeGate(Component):
    """Admit a trajectory only if the executor-as-judge deemed it solved (``meta["judge"]``).

    The agent loop writes the judge's verdict into the trajectory's metrics (1 yes, 0 no, 0.5
    unreadable); the ground-truth checker is never consulted here.

    Parameters
    ----------
    min_judge : float, default 0.5
        Admit when ``meta["judge"] >= min_judge`` (0.5 admits an unreadable verdict; 1.0
        refuses it).
    missing : {"admit", "reject"}, default "admit"
        Entries written without a verdict (a peer's, an attacker's, a user's ``write``) are
        not trajectories of this agent; the gate does not apply to them by default.

    Raises
    ------
    InvalidInput
        ``min_judge`` outside [0, 1] or an unknown ``missing``.

    Examples
    --------
    >>> m = Entry("a", "n", "raw", "Task: t", 1, 1, np.zeros(2, dtype=np.float32),
    ...           meta={"judge": 0.0})
    >>> JudgeGate().admit(m, [], np.zeros((0, 2)), 0).ok
    False
    """

    decision = "admit"

    def __init__(self, min_judge: float = 0.5, missing: str = "admit"):
        self.min_judge = min_judge
        self.missing = missing
        if not 0.0 <= float(min_judge) <= 1.0:
            raise InvalidInput(f"min_judge must be in [0, 1], got {min_judge!r}")
        if missing not in ("admit", "reject"):
            raise InvalidInput(f"missing must be 'admit' or 'reject', got {missing!r}")

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        j = candidate.meta.get("judge")
        if j is None:
            ok = self.missing == "admit"
            return Verdict(ok, float("nan"), f"LLM judge gate: no verdict ({self.missing})")
        j = float(j)
        if j >= self.min_judge:
            return Verdict(True, j, f"LLM judge gate: judged {'solved' if j >= 1 else 'unsure'}")
        return Verdict(False, j, "LLM judge gate: the executor judged the task not solved")


__all__ = ["JudgeGate"]
