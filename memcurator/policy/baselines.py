"""Baseline keep policies the CURATOR paper measures against (Section V-A).

Each differs from :class:`~memcurator.policy.base.Policy` only in its keep order (and keep-all and
full-oracle in being unbounded), so the memory's budget mechanism is shared by all of them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memcurator.policy.base import Policy
from memcurator.types import Entry


class KeepAll(Policy):
    """No curation: every write is kept; ``max_bytes`` does not apply.

    Examples
    --------
    >>> KeepAll().bounded
    False
    """

    name = "keep-all"
    bounded = False


class NoMemory(Policy):
    """Writes nothing: the agent without experience memory (lower bound)."""

    name = "no-memory"
    writes = False

    def admit(
        self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int
    ) -> tuple[bool, float, str]:
        return False, float("nan"), "no-memory keeps nothing"


class LRU(Policy):
    """Least recently used out first: priority is the last step an entry was injected or created."""

    name = "lru"

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        return np.array([max(m.last_used_step, m.created_step) for m in entries], dtype=np.float64)

    def evict_reason(self) -> str:
        return "least recently used when the byte budget was full"


class Recency(Policy):
    """Oldest out first (FIFO by creation step)."""

    name = "recency"

    def evict_reason(self) -> str:
        return "oldest entry when the byte budget was full"


class SuccessOnly(Policy):
    """Replay by success count: entries that led to the most successes stay; ties go to newer.

    Like the on-device success-replay baselines in CURATOR's evaluation, it writes only
    successful trajectories (as every policy here does by default) and keeps by success count.
    """

    name = "success-only"

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        return np.array(
            [m.successes - m.failures + 1e-6 * m.created_step for m in entries], dtype=np.float64
        )

    def evict_reason(self) -> str:
        return "fewest successes when the byte budget was full"


class FullOracle(Policy):
    """Keep everything and recall with an oracle: an upper bound, not a deployable policy.

    Parameters
    ----------
    oracle : callable (Entry) -> bool, optional
        Set by the benchmark per task: whether an entry is a correct, current exemplar for the
        task at hand (same family, written after the family's last drift). Recall keeps only
        those entries, ranked by cosine like the others; with no oracle it ranks like keep-all.
    """

    name = "full-oracle"
    bounded = False
    recall_all = True  # rank every resident entry, not only the BM25/dense candidate pool

    def __init__(self, oracle: Callable[[Entry], bool] | None = None):
        self.oracle = oracle

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> np.ndarray:
        if self.oracle is None:
            return np.asarray(cosine, dtype=np.float64)
        ok = np.array([bool(self.oracle(m)) for m in candidates])
        return np.where(ok, np.asarray(cosine, dtype=np.float64), -np.inf)
