"""Shared estimators: the learned state that several decisions of one policy read.

A policy's components (admit, keep, rank, learn, share) are small and stateless apart from their
parameters; what they learn together lives in an estimator, built once per policy and handed to
every component that declares it in ``needs``:

- ``"rho"`` — :class:`RhoEstimator`: CURATOR's net-value density ρ (Eq. 1-4), its query sketch and
  working-task centroid, the helpfulness head q(m), and the energy virtual queue (Eq. 6). Its
  helpfulness term can be CURATOR's marginal utility or TokenWorth's learned worth
  (``helpfulness="worth"``): that is ``curator+worth``, by composition.
- ``"worth"`` — :class:`WorthEstimator`: TokenWorth's learner (Sec. 4.2-4.3), the FIFO of probe
  queries, and the bank capacity ``B_max`` (Sec. 4.4).

An estimator never mutates an entry: learning returns the entries' updated statistics for the
memory to persist.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Features, Params, StatUpdates
from memcurator.types import Entry
from memcurator.value.curator import CuratorScorer, EnergyQueue, RhoParams, ScoreTerms
from memcurator.value.tokenworth import (
    BASE_FEATURES,
    MemoryStats,
    TokenWorthLearner,
    _pack,
    _unpack,
    features_array,
    pair_feature_names,
)

#: ``Entry.stats`` keys the worth learner writes: examples taken from the entry, and their summed
#: signed outcome ``y``.
STAT_N, STAT_Y = "tw_n", "tw_y"


def _pos_int(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise InvalidInput(f"{name} must be a positive int, got {v!r}")


class Estimator(Params):
    """Base of shared estimators: ``attach(dim, estimators)`` builds the learned state."""

    needs: tuple[str, ...] = ()

    def attach(self, dim: int, estimators: Mapping[str, Estimator]) -> None:
        """Called once per policy with the embedding dimension and the other estimators."""
        self._dim = dim

    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` returned."""


# ----------------------------------------------------------------------------------- worth
def _make_learner(
    residual: bool, agop: bool, learner_params: Mapping[str, Any] | None, seed: int | None
) -> TokenWorthLearner:
    extra = dict(learner_params or {})
    clash = sorted({"residual", "agop", "seed"} & set(extra))
    if clash:
        raise InvalidInput(f"pass {clash} as policy parameters, not inside learner_params")
    try:
        return TokenWorthLearner(residual=residual, agop=agop, seed=seed, **extra)
    except TypeError as exc:
        raise InvalidInput(f"learner_params: {exc}") from None


@dataclass(eq=False, repr=False)
class WorthEstimator(Estimator):
    """TokenWorth's learned query-dependent worth, shared by its rank, learn, admit and keep.

    Parameters
    ----------
    capacity : int, default 64
        ``B_max``, the most records the bank holds (a count; the memory's byte budget applies as
        well). The paper uses 50 (DB, BigCodeBench) and 128 (ALFWorld).
    n_probes : int, default 8
        ``P``: probe queries of the probe-averaged worth are the last ``P`` query embeddings.
    n_blocks : int, default 16
        Residual pair features (see :func:`~memcurator.value.tokenworth.features`).
    kappa : float, default 0.02, per step
        Recency decay rate κ of the base feature ``exp(-κ · age)``.
    residual, agop : bool, default True
        ``False`` are the ``tokenworth/base-only`` and ``tokenworth/no-agop`` ablations.
    learner_params : dict or None
        Any other :class:`~memcurator.value.tokenworth.TokenWorthLearner` hyperparameter.
    seed : int or None, default 0
        Passed to the learner (which draws no random numbers).
    capacity_from_bytes : bool, default False
        Tie ``B_max`` to the byte budget (``tokenworth/bytes-capacity``): at every admission,
        ``B_max = max(1, floor(max_bytes / mean bytes of the resident entries and the
        candidate))``, so the bank fills by count as the byte budget fills and the
        coverage-quality rules run (with ``capacity`` = 64 they never did at 100 KB, where ~34
        entries fit). Needs :meth:`set_budget`; without a budget (unbounded) ``capacity`` holds.

    Raises
    ------
    InvalidInput
        Non-positive ``capacity``/``n_probes``, ``n_blocks`` outside [1, dim], learner
        parameters the learner does not take.

    References
    ----------
    TokenWorth, Sec. 4.1-4.4, App. B.1-B.3.
    """

    capacity: int = 64
    n_probes: int = 8
    n_blocks: int = 16
    kappa: float = 0.02
    residual: bool = True
    agop: bool = True
    learner_params: dict[str, Any] | None = None
    seed: int | None = 0
    capacity_from_bytes: bool = False

    def __post_init__(self) -> None:
        _pos_int("capacity", self.capacity)
        _pos_int("n_probes", self.n_probes)
        # validate now, not at attach
        _make_learner(self.residual, self.agop, self.learner_params, self.seed)

    def attach(self, dim: int, estimators: Mapping[str, Estimator]) -> None:
        super().attach(dim, estimators)
        if not 1 <= self.n_blocks <= dim:
            raise InvalidInput(
                f"n_blocks must be in [1, {dim}] (the embedding dim), got {self.n_blocks}"
            )
        self.learner = _make_learner(self.residual, self.agop, self.learner_params, self.seed)
        self.columns = tuple(BASE_FEATURES) + tuple(pair_feature_names(self.n_blocks))
        self.probes: deque[np.ndarray] = deque(maxlen=self.n_probes)
        self.last_q: np.ndarray | None = None
        self.step = 0  # the step of the latest decision, read by q(m) under curator+worth
        self.victims: list[tuple[str, float, str]] = []  # named by admission, taken by keep
        self._budget: int | None = getattr(self, "_budget", None)
        self._b_max: int | None = None

    def set_budget(self, max_bytes: int | None) -> None:
        """The memory's byte budget (None: unbounded); read when ``capacity_from_bytes``."""
        self._budget = None if max_bytes is None else int(max_bytes)

    def bank_capacity(self) -> int:
        """``B_max`` in force: ``capacity``, or the one last fitted to the byte budget."""
        return self._b_max if self._b_max is not None else self.capacity

    def fit_capacity(self, resident: list[Entry], candidate: Entry) -> int:
        """With ``capacity_from_bytes`` and a budget, refit ``B_max`` from the mean entry bytes
        of ``resident`` and ``candidate``; returns the capacity in force."""
        if self.capacity_from_bytes and self._budget is not None:
            sizes = [m.bytes for m in resident] + [candidate.bytes]
            self._b_max = max(1, int(self._budget // max(float(np.mean(sizes)), 1.0)))
        return self.bank_capacity()

    def features(
        self, e_q: np.ndarray, entries: list[Entry], E: np.ndarray, step: int
    ) -> np.ndarray:
        """Learner inputs of ``entries`` (rows of ``E``) for query ``e_q``, (n, 4 + n_blocks)."""
        stats = [MemoryStats.from_entry(m, step) for m in entries]
        return features_array(e_q, E, stats, n_blocks=self.n_blocks, kappa=self.kappa)

    def score(self, V: np.ndarray) -> np.ndarray:
        """Worth of feature rows ``V`` (n, D), shape (n,)."""
        return self.learner.score_array(V, self.columns)

    def observe(self, e_q: np.ndarray) -> None:
        """Push one query embedding into the probe FIFO."""
        self.probes.append(np.array(e_q, dtype=np.float64))

    def rank(
        self, entries: list[Entry], e_q: np.ndarray, step: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Worth of each candidate for ``e_q`` and the features it was computed from.

        Returns
        -------
        worth : ndarray of shape (n,)
        features : ndarray of shape (n, 4 + n_blocks)
            What :meth:`learn` trains on when these candidates are injected.
        """
        q = np.array(e_q, dtype=np.float64)
        E = np.vstack([m.embedding for m in entries]) if entries else np.zeros((0, self._dim))
        V = self.features(q, entries, E, step)
        self.last_q = q
        return self.score(V), V

    def learn(
        self, reward: float, injected: list[Entry], step: int, features: Features | None = None
    ) -> StatUpdates:
        """One example ``(x, 2·reward − 1)`` per injected entry; returns their updated stats.

        ``x`` is the entry's features from the recall that injected it (``features[id]``,
        carried by :class:`~memcurator.types.RecallResult`); an entry without them (ids passed
        by hand) is described against the last ranked query, or skipped when there was none.
        """
        y = 2.0 * float(reward) - 1.0
        out: dict[str, dict[str, float]] = {}
        for m in injected:
            v = None if features is None else features.get(m.id)
            if v is None:
                if self.last_q is None:
                    continue
                v = self.features(self.last_q, [m], m.embedding[None, :], step)[0]
            self.learner.learn_one(dict(zip(self.columns, np.asarray(v).tolist(), strict=True)), y)
            st = dict(m.stats)
            st[STAT_N] = st.get(STAT_N, 0.0) + 1.0
            st[STAT_Y] = st.get(STAT_Y, 0.0) + y
            out[m.id] = st
        return out

    def probe_matrix(self) -> np.ndarray:
        return np.vstack(list(self.probes)) if self.probes else np.zeros((0, self._dim))

    def probe_worth(
        self, entries: list[Entry], E: np.ndarray, step: int, probes: np.ndarray | None = None
    ) -> np.ndarray:
        """Worth of each entry under each probe query, shape (n, p).

        Probes default to the FIFO of recent queries. With none seen yet, each entry is scored
        against its own embedding (p = 1). Same values as
        :func:`~memcurator.value.tokenworth_lifecycle.probe_worths`.
        """
        n = len(entries)
        E = np.asarray(E, dtype=np.float64).reshape(n, self._dim)
        stats = [MemoryStats.from_entry(m, step) for m in entries]
        P = self.probe_matrix() if probes is None else np.asarray(probes, dtype=np.float64)
        kw: dict[str, Any] = {"n_blocks": self.n_blocks, "kappa": self.kappa}
        if not len(P):
            V = (
                np.vstack(
                    [features_array(E[i], E[i : i + 1], stats[i : i + 1], **kw) for i in range(n)]
                )
                if n
                else np.zeros((0, len(self.columns)))
            )
            return self.score(V)[:, None]
        V = np.vstack([features_array(q, E, stats, **kw) for q in P])  # (p·n, D), probe-major
        return self.score(V).reshape(len(P), n).T

    def q(self, entries: list[Entry]) -> np.ndarray:
        """q(m) = clip(probe-averaged learned worth, -1, 1) at the latest step, shape (n,)."""
        E = np.vstack([m.embedding for m in entries])
        w = self.probe_worth(entries, E, self.step).mean(axis=1)
        return np.clip(w, -1.0, 1.0)

    def state(self) -> dict[str, Any]:
        return {
            "learner": self.learner.state(),
            "probes": _pack(self.probe_matrix()),
            "last_q": _pack(self.last_q),
            "victims": [list(v) for v in self.victims],
        }

    def load_state(self, st: Mapping[str, Any]) -> None:
        if "learner" not in st:
            return
        self.learner.load_state(st["learner"])
        self.probes.clear()
        P = _unpack(st["probes"])
        if P is not None:
            self.probes.extend(row.copy() for row in P)
        self.last_q = _unpack(st["last_q"])
        self.victims = [(str(i), float(s), str(r)) for i, s, r in st.get("victims", [])]


# ----------------------------------------------------------------------------------- rho
#: the helpfulness heads :class:`RhoEstimator` can use
HELPFULNESS_HEADS = ("marginal-utility", "worth", "beta-lcb", "local-baseline")


class _WorthScorer(CuratorScorer):
    """CURATOR's scorer whose helpfulness q(m) comes from a callable over the entries."""

    def __init__(self, q_of: Any, **kw: Any):
        super().__init__(**kw)
        self._q_of = q_of

    def entry_arrays(
        self, entries: list[Entry], E: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        arr = super().entry_arrays(entries)
        if entries:
            arr["q"] = self._q_of(entries)
        return arr


@dataclass(eq=False, repr=False, kw_only=True)
class RhoEstimator(Estimator, RhoParams):
    """CURATOR's net-value density ρ(m) = (V̂ − λĤ)/b with its running statistics.

    Parameters
    ----------
    helpfulness : {"marginal-utility", "worth", "beta-lcb", "local-baseline"}, \
default "marginal-utility"
        Where q(m) comes from: CURATOR's helpfulness head, the ``"worth"`` estimator's
        probe-averaged learned worth clipped to [-1, 1] (``curator+worth``), the lower
        confidence bound of the entry's injected-success rate
        (:class:`~memcurator.value.helpfulness_lcb.BetaLCBUtility`, ``curator/lcb``), or the
        marginal utility against nearby tasks without the entry
        (:class:`~memcurator.value.helpfulness_local.LocalBaselineUtility`,
        ``curator/local-baseline``).
    energy_budget : float or None, default None
        ε̄ per step in energy-proxy bytes; enables the virtual queue of Eq. 6.
    nu : float, default 1e6
        ν of the drift-plus-penalty admission ``ρ(m) − Q·ε(m)/ν``.
    lcb_level, lcb_gamma : float, default 0.1, 0.95
        The bound's quantile and count discount (``helpfulness="beta-lcb"`` only).
    lam, kappa, phi, propensity, provenance_weights, use_propensity, use_helpfulness, \
use_abstraction, use_negative_transfer, use_provenance, per_byte, eta_offset :
        Passed to :class:`~memcurator.value.curator.CuratorScorer`; see
        :class:`~memcurator.value.curator.RhoParams` (Eq. 1-4). The ``use_*`` and ``per_byte``
        switches are the ablations (``curator/no-provenance``, ``curator/no-per-byte``, ...),
        ``eta_offset`` is ``curator/eta-offset``.

    Raises
    ------
    InvalidInput
        Unknown ``helpfulness``; the scorer's own checks (non-finite λ, κ ≤ 0, ...).

    References
    ----------
    CURATOR, Section III-B, Eq. 1-4 and Eq. 6.
    """

    helpfulness: str = "marginal-utility"
    energy_budget: float | None = None
    nu: float = 1e6
    lcb_level: float = 0.1
    lcb_gamma: float = 0.95

    def __post_init__(self) -> None:
        self.provenance_weights = tuple(self.provenance_weights)
        if self.helpfulness not in HELPFULNESS_HEADS:
            raise InvalidInput(
                f"helpfulness must be one of {list(HELPFULNESS_HEADS)}, got {self.helpfulness!r}"
            )
        if self.helpfulness == "beta-lcb":
            from memcurator.value.helpfulness_lcb import BetaLCBUtility

            BetaLCBUtility(level=self.lcb_level, lcb_gamma=self.lcb_gamma)  # validate now
        self.needs = ("worth",) if self.helpfulness == "worth" else ()
        CuratorScorer(**self._scorer_kw())  # validate the scorer's parameters now

    def _scorer_kw(self) -> dict[str, Any]:
        return {**self.rho_params(), "dim": getattr(self, "_dim", 1)}

    def attach(self, dim: int, estimators: Mapping[str, Estimator]) -> None:
        super().attach(dim, estimators)
        kw = self._scorer_kw()
        if self.helpfulness == "worth":
            worth = estimators["worth"]
            assert isinstance(worth, WorthEstimator)
            self.scorer: CuratorScorer = _WorthScorer(worth.q, **kw)
        elif self.helpfulness == "beta-lcb":
            from memcurator.value.helpfulness_lcb import BetaLCBUtility

            head = BetaLCBUtility(level=self.lcb_level, lcb_gamma=self.lcb_gamma)
            self.scorer = CuratorScorer(helpfulness=head, **kw)
        elif self.helpfulness == "local-baseline":
            from memcurator.value.helpfulness_local import LocalBaselineUtility

            self.scorer = CuratorScorer(helpfulness=LocalBaselineUtility(), **kw)
        else:
            self.scorer = CuratorScorer(**kw)
        self.energy = (
            EnergyQueue(self.energy_budget, self.nu) if self.energy_budget is not None else None
        )

    def terms(
        self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray | None = None
    ) -> ScoreTerms:
        """All of ρ's terms for ``entries`` (rows of ``E``), each of shape (n,)."""
        return self.scorer.score(entries, E, sketch=sketch)

    def sketch_like(self, E: np.ndarray) -> np.ndarray | None:
        """q̄ in ``E``'s precision when :meth:`candidate_terms` can use ``E @ q̄`` precomputed
        (its ``res_dots``); None when it cannot (the ``worth`` head, no propensity term)."""
        if self.helpfulness == "worth" or not self.scorer.use_propensity:
            return None
        return self.scorer.sketch_like(E)

    def candidate_terms(
        self,
        candidate: Entry,
        resident: list[Entry],
        E: np.ndarray,
        res_dots: np.ndarray | None = None,
    ) -> ScoreTerms:
        """ρ's terms of one write ``candidate`` next to ``resident`` (rows of ``E``), shape (1,).

        The terms of ``terms(resident + [candidate], vstack(E, e))[-1:]`` (the propensity's
        normaliser in ``E``'s precision); with CURATOR's own helpfulness head only the
        candidate's per-entry inputs are computed
        (:meth:`~memcurator.value.curator.CuratorScorer.score_candidate`). The ``worth`` head's
        q depends on the whole set's probe features, so it is scored in full. ``res_dots``:
        ``E @ self.sketch_like(E)``, shape (n,), when the caller took it already.
        """
        if self.helpfulness == "worth":
            d = candidate.embedding.shape[0]
            mat = np.vstack([np.asarray(E).reshape(-1, d), candidate.embedding])
            t = self.terms(resident + [candidate], mat)
            return ScoreTerms(*(np.asarray(x)[-1:] for x in t))
        return self.scorer.score_candidate(candidate, E, res_dots=res_dots)

    def q(self, entries: list[Entry]) -> np.ndarray:
        """Helpfulness q(m) of ``entries``, shape (n,)."""
        return self.scorer.entry_arrays(entries)["q"]

    def state(self) -> dict[str, Any]:
        st: dict[str, Any] = {"scorer": self.scorer.state()}
        if self.energy is not None:
            st["Q"] = self.energy.Q
        return st

    def load_state(self, state: Mapping[str, Any]) -> None:
        if "scorer" in state:
            self.scorer.load_state(dict(state["scorer"]))
        if self.energy is not None and "Q" in state:
            self.energy.Q = float(state["Q"])


__all__ = ["STAT_N", "STAT_Y", "Estimator", "RhoEstimator", "WorthEstimator"]
