"""Admit components: may a write become resident?

References
----------
CURATOR, Alg. 1 lines 18-22 (Trust: ρ > θ) and Eq. 6 (drift-plus-penalty admission).
TokenWorth, Sec. 4.4 and App. B.2 (coverage-quality admission and replacement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memcurator.policy.base import Verdict
from memcurator.policy.components import Component
from memcurator.types import Entry
from memcurator.value.tokenworth_lifecycle import WriteParams, decide_write


class AdmitAll(Component):
    """Admit every write (the baselines).

    Examples
    --------
    >>> AdmitAll().admit(None, [], np.zeros((0, 2)), 0).ok
    True
    """

    decision = "admit"

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        name = getattr(self, "_policy_name", "this policy")
        return Verdict(True, float("nan"), f"{name} admits every write")


class AdmitNone(Component):
    """Admit nothing (the no-memory baseline)."""

    decision = "admit"

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        name = getattr(self, "_policy_name", "this policy")
        return Verdict(False, float("nan"), f"{name} keeps nothing")


class RhoTrust(Component):
    """CURATOR's Trust gate: a peer or external write is admitted only if ρ − penalty > θ.

    ρ is recomputed locally with the candidate scored among the resident set (so its propensity
    is a share of that set). With an energy budget (the ``rho`` estimator's ``energy_budget``),
    every write, self-derived ones included, pays the drift-plus-penalty ``Q·ε(m)/ν`` (Eq. 6).
    Self-derived writes are otherwise not gated (the paper's Trust acts on peer entries); Keep
    still ranks them by ρ.

    Parameters
    ----------
    theta : float, default 0.0
        Trust threshold θ (Alg. 1, lines 18-22).
    """

    decision = "admit"
    needs = ("rho",)

    def __init__(self, theta: float = 0.0):
        self.theta = theta

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        rho_est = self._est["rho"]
        t = rho_est.candidate_terms(candidate, resident, E)
        rho = float(t.rho[-1])
        pen = 0.0
        if rho_est.energy is not None:
            pen = rho_est.energy.penalty(len(candidate.text.encode("utf-8")) + candidate.bytes)
        if candidate.origin != "self" or rho_est.energy is not None:
            if rho - pen <= self.theta:
                return Verdict(
                    False,
                    rho,
                    f"trust: rho={rho:.3g} - energy penalty {pen:.3g} <= theta={self.theta:g} "
                    f"(V={t.V[-1]:.3f}, harm={t.H[-1]:.3f}, provenance pi={t.pi[-1]:.3f}, "
                    f"origin={candidate.origin})",
                )
            return Verdict(
                True,
                rho,
                f"trust: rho={rho:.3g} > theta={self.theta:g} (origin={candidate.origin})",
            )
        return Verdict(True, rho, "self-derived entry; Keep ranks it by rho")


@dataclass(eq=False, repr=False)
class WorthAdmission(Component):
    """TokenWorth's coverage-quality admission on probe-averaged worth under capacity B_max.

    While fewer than ``B_max`` records are resident (the ``worth`` estimator's ``capacity``), a
    write is admitted for coverage. When full,
    :func:`~memcurator.value.tokenworth_lifecycle.decide_write` admits a novel or a clearly better
    candidate, naming the lowest-worth resident as the victim, or lets it replace its nearest
    low-utility neighbour, or rejects it. The victim is handed to the keep component through
    the estimator (``worth.victims``) and leaves in the same write.

    Parameters
    ----------
    tau_nov, delta_write, tau_pos, delta_rep : float, default 0.35, 0.02, 0.45, 0.10
    replace_k : int, default 1
        See :class:`~memcurator.value.tokenworth_lifecycle.WriteParams`.
    """

    decision = "admit"
    needs = ("worth",)

    # the gate's own thresholds, with its defaults; checked by WriteParams
    tau_nov: float = WriteParams.tau_nov
    delta_write: float = WriteParams.delta_write
    tau_pos: float = WriteParams.tau_pos
    delta_rep: float = WriteParams.delta_rep
    replace_k: int = WriteParams.replace_k

    def __post_init__(self) -> None:
        self._params = WriteParams(**self.get_params())

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        wm = self._est["worth"]
        probes = wm.probe_matrix()
        if not len(probes):
            probes = np.asarray(candidate.embedding, dtype=np.float64)[None, :]
        cw = wm.probe_worth([candidate], candidate.embedding[None, :], step, probes)[0]
        n = len(resident)
        cap = wm.fit_capacity(resident, candidate)  # B_max (capacity unless tied to bytes)
        full = n >= cap
        bw = wm.probe_worth(resident, E, step, probes) if full else np.zeros(n)
        d = decide_write(
            candidate.embedding,
            cw,
            np.asarray(E, dtype=np.float64).reshape(n, self._dim),
            bw,
            cap,
            params=self._params,
        )
        if d.action == "reject":
            return Verdict(False, d.score, d.reason)
        if d.victim_index is None:
            return Verdict(True, d.score, d.reason)
        v = resident[d.victim_index]
        vw = float(np.mean(bw[d.victim_index]))
        if d.action == "replace":
            why = (
                f"replaced by its near neighbour {candidate.id}: worth gain "
                f"{d.score - vw:.3f} >= delta_rep {self.delta_rep:g} (worth {vw:.3f})"
            )
            reason = f"replace {v.id}: {d.reason}"
        else:
            why = (
                f"lowest probe-averaged worth ({vw:.3f}) in a full bank "
                f"({n}/{cap}); made room for {candidate.id}"
            )
            reason = f"{d.reason}; victim {v.id}"
        wm.victims = [(v.id, vw, why)]  # one per admission; the keep pass takes it right after
        return Verdict(True, d.score, reason)


__all__ = ["AdmitAll", "AdmitNone", "RhoTrust", "WorthAdmission"]
