"""The policy interface: one object per decision bundle, called by :class:`~memcurator.Memory`.

A policy never touches the store. The memory asks it, in turn: how to rank recall candidates
(``rerank``), whether to admit a write (``admit``), in what order entries stay resident under the
budget (``priority``; the memory enforces ``max_bytes`` and evicts from the tail, as cachetools'
``Cache`` does with ``popitem``), and it tells it what happened (``observe_query``, ``feedback``).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from memcurator.types import Entry


class Params:
    """scikit-learn-style parameters: ``get_params``, ``clone`` and ``repr`` from ``__init__``."""

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments, read back from attributes of the same name."""
        sig = inspect.signature(type(self).__init__)
        return {
            k: getattr(self, k)
            for k, p in sig.parameters.items()
            if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }

    def clone(self) -> Any:
        """A fresh, unattached copy with the same parameters and no learned state."""
        return type(self)(**self.get_params())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class Policy(Params):
    """Base policy: admit every write, rank by relevance, keep everything that fits.

    Class attributes a subclass may override:

    ``bounded`` (bool)
        Whether the memory's ``max_bytes`` applies; ``False`` for keep-all baselines.
    ``distills`` (bool)
        Whether an entry about to fall out is first offered to the distiller (CURATOR, Alg. 1).
    ``form`` ({"raw", "insight"})
        What :meth:`Memory.record` writes: the raw trajectory, or its distilled insight.
    ``writes`` (bool)
        ``False`` for the no-memory baseline.
    """

    name = "base"
    bounded = True
    distills = False
    form = "raw"
    writes = True

    def attach(self, dim: int) -> None:
        """Called once by the memory with the embedding dimension, before any other call."""
        self._dim = dim

    # --- profile -----------------------------------------------------------------
    def observe_query(self, e_q: np.ndarray) -> None:
        """A query was recalled for; ``e_q`` has shape (d,)."""

    def feedback(self, reward: float, injected: list[Entry], step: int) -> None:
        """A task ended with ``reward`` in [0, 1]; ``injected`` were in its prompt.

        The memory has already updated ``uses``/``successes``/``failures``/``last_used_step``;
        a policy updates its own statistics in ``Entry.stats`` in place.
        """

    def observe_energy(self, eps: float) -> None:
        """The step that just ended spent ``eps`` energy-proxy bytes (embedding + scanning)."""

    # --- decisions ---------------------------------------------------------------
    def admit(
        self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int
    ) -> tuple[bool, float, str]:
        """Whether to admit ``candidate``; returns (admit, score, reason)."""
        return True, float("nan"), f"{self.name} admits every write"

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        """Keep order, shape (n,): higher stays resident first. Default: newest first."""
        return np.array([m.created_step for m in entries], dtype=np.float64)

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> np.ndarray:
        """Final recall scores of the candidates, shape (n_candidates,). Default: cosine."""
        return np.asarray(cosine, dtype=np.float64)

    def clone(self) -> Any:
        """A fresh copy with the same parameters and no learned state; keeps the preset name
        (``create_policy`` sets it), so decisions and saved state stay attributed to the preset."""
        c = super().clone()
        if "name" in vars(self):
            c.name = self.name
        return c

    def victims(
        self, entries: list[Entry], E: np.ndarray, step: int
    ) -> list[tuple[str, float, str]]:
        """Entries to evict regardless of bytes, as (id, score, reason); default none.

        A count capacity or a replacement rule (TokenWorth, Sec. 4.4) names its victims here; the
        memory deletes and logs each one.
        """
        return []

    def evict_reason(self) -> str:
        return f"lowest {self.name} priority when the byte budget was full"

    # --- persistence ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state` returned."""
