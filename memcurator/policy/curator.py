"""CURATOR as a policy: Keep, Trust and the recall reranker read one score ρ.

References
----------
CURATOR, Algorithm 1 and Eq. 1-8. Share lives in :mod:`memcurator.policy.share` and reads the same
scorer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memcurator.policy.base import Policy
from memcurator.types import Entry
from memcurator.value.curator import CuratorScorer, EnergyQueue, ScoreTerms
from memcurator.value.provenance import DEFAULT_PROVENANCE_WEIGHTS


class Curator(Policy):
    """Net-value-density governance (CURATOR).

    Parameters
    ----------
    lam, kappa, phi, propensity, provenance_weights :
        Passed to :class:`~memcurator.value.curator.CuratorScorer` (Eq. 1-4).
    use_propensity, use_helpfulness, use_abstraction, use_negative_transfer, use_provenance, \
per_byte : bool
        Ablation switches (``curator/no-provenance``, ``curator/no-per-byte``, ...).
    theta : float, default 0.0
        Trust threshold θ: a peer or external write is admitted only if its locally recomputed
        ρ > θ (Alg. 1, lines 18-22). Self-derived writes are not gated (the paper's Trust acts on
        peer entries); Keep still ranks them by ρ.
    beta_q : float, default 0.5
        Recall reranking weight: final score = cosine + beta_q · q(m), so that among equally
        relevant entries the one with the better observed marginal utility is injected. Our
        addition: the paper ranks candidates only through propensity; 0 switches it off.
    distill : bool, default True
        Offer an entry about to fall out to the distiller first (Alg. 1, line 9).
    energy_budget : float or None, default None
        ε̄ per step in energy-proxy bytes; enables the virtual queue of Eq. 6 and the
        drift-plus-penalty admission ρ(m) − Q·ε(m)/ν > θ for every write.
    nu : float, default 1e6
        ν of the drift-plus-penalty admission.
    redundancy_delta : float or None, default 0.85
        Share's redundancy test (Alg. 1 line 15, threshold δ) applied in Keep too: while the
        budget is exceeded, an entry whose cosine with a higher-ranked kept entry is ≥ δ is
        evicted as redundant, so the budget holds one exemplar per kind of task instead of many
        copies of the popular ones. Our extension; None switches it off. With the hashing
        embedder, same-family SQL exemplars have cosine ≥ 0.86 (5th percentile) and different
        families ≤ 0.78 (max), measured on 80 LifelongAgentBench families × 3 variants.

    Notes
    -----
    Keep order. Prop. 1's density greedy solves Eq. 5 for entries of positive net value; an entry
    of non-positive net value V̂ − λĤ never raises the objective of Eq. 5, and dividing a negative
    value by b would even favour the larger of two harmful entries. So entries of positive net
    value are ranked by ρ, and all others after them by net value (they stay only while the
    budget has room, as Alg. 1 keeps whatever fits).

    Examples
    --------
    >>> pol = Curator(use_provenance=False)
    >>> pol.clone().get_params()["use_provenance"]
    False
    """

    name = "curator"
    bounded = True
    form = "raw"

    def __init__(
        self,
        lam: float = 1.0,
        kappa: float = 0.1,
        phi: float = 0.9,
        propensity: str = "relative",
        provenance_weights: tuple[float, ...] = DEFAULT_PROVENANCE_WEIGHTS,
        use_propensity: bool = True,
        use_helpfulness: bool = True,
        use_abstraction: bool = True,
        use_negative_transfer: bool = True,
        use_provenance: bool = True,
        per_byte: bool = True,
        theta: float = 0.0,
        beta_q: float = 0.5,
        distill: bool = True,
        energy_budget: float | None = None,
        nu: float = 1e6,
        redundancy_delta: float | None = 0.85,
    ):
        self.lam = lam
        self.kappa = kappa
        self.phi = phi
        self.propensity = propensity
        self.provenance_weights = provenance_weights
        self.use_propensity = use_propensity
        self.use_helpfulness = use_helpfulness
        self.use_abstraction = use_abstraction
        self.use_negative_transfer = use_negative_transfer
        self.use_provenance = use_provenance
        self.per_byte = per_byte
        self.theta = theta
        self.beta_q = beta_q
        self.distill = distill
        self.energy_budget = energy_budget
        self.nu = nu
        self.redundancy_delta = redundancy_delta
        self.distills = distill

    def attach(self, dim: int) -> None:
        super().attach(dim)
        self.scorer = CuratorScorer(
            dim,
            lam=self.lam,
            kappa=self.kappa,
            phi=self.phi,
            propensity=self.propensity,
            provenance_weights=tuple(self.provenance_weights),
            use_propensity=self.use_propensity,
            use_helpfulness=self.use_helpfulness,
            use_abstraction=self.use_abstraction,
            use_negative_transfer=self.use_negative_transfer,
            use_provenance=self.use_provenance,
            per_byte=self.per_byte,
        )
        self.energy = (
            EnergyQueue(self.energy_budget, self.nu) if self.energy_budget is not None else None
        )

    # --- profile -------------------------------------------------------------------
    def observe_query(self, e_q: np.ndarray) -> None:
        self.scorer.observe_query(e_q)

    def feedback(self, reward: float, injected: list[Entry], step: int) -> None:
        self.scorer.helpfulness.observe(reward, [m.stats for m in injected])

    def observe_energy(self, eps: float) -> None:
        if self.energy is not None:
            self.energy.update(eps)  # Q(t+1) = [Q(t) + ε(t) − ε̄]₊ (Eq. 6)

    # --- score ---------------------------------------------------------------------
    def terms(self, entries: list[Entry], E: np.ndarray) -> ScoreTerms:
        """All of ρ's terms for ``entries`` (rows of ``E``)."""
        return self.scorer.score(entries, E)

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        t = self.terms(entries, E)
        net = t.V - self.lam * t.H
        # positive net value: by density ρ (Prop. 1); the rest after them, by net value
        lowest = float(t.rho[net > 0].min()) if np.any(net > 0) else 0.0
        return np.where(net > 0, t.rho, lowest - 1.0 + np.tanh(net))

    def admit(
        self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int
    ) -> tuple[bool, float, str]:
        # Score the candidate among the resident set, so its propensity is a share of that set.
        ents = resident + [candidate]
        mat = np.vstack([E.reshape(-1, candidate.embedding.shape[0]), candidate.embedding])
        t = self.scorer.score(ents, mat)
        rho = float(t.rho[-1])
        pen = 0.0
        if self.energy is not None:
            pen = self.energy.penalty(len(candidate.text.encode("utf-8")) + candidate.bytes)
        if candidate.origin != "self" or self.energy is not None:
            if rho - pen <= self.theta:
                return (
                    False,
                    rho,
                    f"trust: rho={rho:.3g} - energy penalty {pen:.3g} <= theta={self.theta:g} "
                    f"(V={t.V[-1]:.3f}, harm={t.H[-1]:.3f}, provenance pi={t.pi[-1]:.3f}, "
                    f"origin={candidate.origin})",
                )
            return (
                True,
                rho,
                f"trust: rho={rho:.3g} > theta={self.theta:g} (origin={candidate.origin})",
            )
        return True, rho, "self-derived entry; Keep ranks it by rho"

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> np.ndarray:
        if self.beta_q == 0:
            return np.asarray(cosine, dtype=np.float64)
        q = np.array([self.scorer.helpfulness.q(m.stats) for m in candidates])
        return np.asarray(cosine, dtype=np.float64) + self.beta_q * q

    def evict_reason(self) -> str:
        return "lowest net-value density rho when the byte budget was full"

    # --- persistence -------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        st: dict[str, Any] = {"scorer": self.scorer.state()}
        if self.energy is not None:
            st["Q"] = self.energy.Q
        return st

    def load_state(self, state: dict[str, Any]) -> None:
        if "scorer" in state:
            self.scorer.load_state(state["scorer"])
        if self.energy is not None and "Q" in state:
            self.energy.Q = float(state["Q"])
