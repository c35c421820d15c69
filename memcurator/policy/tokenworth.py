"""TokenWorth as a policy: learned query-dependent worth ranks recall and governs a bounded bank.

Recall reranks the candidate pool by the learned worth ``w_t · φ(q, m) + η_t · r_t(z(q, m))`` and
injects at most ``k_max`` memories; the task's outcome ``y = 2 · reward − 1`` is learned only for
the memories actually injected; admission and replacement follow the coverage–quality lifecycle
on probe-averaged worth under a count capacity ``B_max`` (the memory's byte budget applies too).
``CuratorWorth`` is CURATOR's ρ with the same learned worth as its helpfulness term.

References
----------
TokenWorth, Sec. 4.1 (recall, rank, inject one), Sec. 4.2-4.3 (the learner,
:class:`~memcurator.value.tokenworth.TokenWorthLearner`), Sec. 4.4 and App. B.1-B.3 (lifecycle,
:func:`~memcurator.value.tokenworth_lifecycle.decide_write`). CURATOR, Eq. 1-3 (ρ, helpfulness q).
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Policy
from memcurator.policy.curator import Curator
from memcurator.types import Entry
from memcurator.value.curator import CuratorScorer
from memcurator.value.provenance import DEFAULT_PROVENANCE_WEIGHTS
from memcurator.value.tokenworth import (
    BASE_FEATURES,
    MemoryStats,
    TokenWorthLearner,
    _pack,
    _unpack,
    features_array,
    pair_feature_names,
)
from memcurator.value.tokenworth_lifecycle import WriteParams, decide_write

__all__ = ["CuratorWorth", "TokenWorth"]

#: ``Entry.stats`` keys this module writes: learner examples taken from the entry, and their
#: summed signed outcome ``y``.
STAT_N, STAT_Y = "tw_n", "tw_y"


def _pos_int(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise InvalidInput(f"{name} must be a positive int, got {v!r}")


class _WorthModel:
    """The learned-worth machinery both policies share (private; not a policy).

    Holds the learner, the FIFO of the last ``n_probes`` query embeddings, and the features of the
    last reranked candidates, so that feedback trains on the inputs the decision was made on.
    Scoring goes through the array fast path (:func:`features_array`, ``score_array``); the
    learner sees dicts only in ``learn_one``.
    """

    def __init__(
        self, dim: int, n_probes: int, n_blocks: int, kappa: float, learner: TokenWorthLearner
    ):
        if not 1 <= n_blocks <= dim:
            raise InvalidInput(
                f"n_blocks must be in [1, {dim}] (the embedding dim), got {n_blocks}"
            )
        self.dim = dim
        self.n_blocks = n_blocks
        self.kappa = kappa
        self.learner = learner
        self.columns = tuple(BASE_FEATURES) + tuple(pair_feature_names(n_blocks))
        self.probes: deque[np.ndarray] = deque(maxlen=n_probes)
        self.last_q: np.ndarray | None = None
        self.pending: dict[str, np.ndarray] = {}  # entry id -> features at its last rerank

    def features(
        self, e_q: np.ndarray, entries: list[Entry], E: np.ndarray, step: int
    ) -> np.ndarray:
        """Learner inputs of ``entries`` (rows of ``E``) for query ``e_q``, (n, 4 + n_blocks)."""
        stats = [MemoryStats.from_entry(m, step) for m in entries]
        return features_array(e_q, E, stats, n_blocks=self.n_blocks, kappa=self.kappa)

    def score(self, V: np.ndarray) -> np.ndarray:
        return self.learner.score_array(V, self.columns)

    def observe(self, e_q: np.ndarray) -> None:
        self.probes.append(np.array(e_q, dtype=np.float64))

    def rank(self, entries: list[Entry], e_q: np.ndarray, step: int) -> np.ndarray:
        """Worth of each candidate for query ``e_q``, shape (n,); caches their features."""
        q = np.array(e_q, dtype=np.float64)
        E = np.vstack([m.embedding for m in entries]) if entries else np.zeros((0, self.dim))
        V = self.features(q, entries, E, step)
        self.last_q = q
        self.pending = {m.id: v for m, v in zip(entries, V, strict=True)}
        return self.score(V)

    def learn(self, reward: float, injected: list[Entry], step: int) -> None:
        """One example ``(x, 2·reward − 1)`` per injected entry; others learn nothing.

        ``x`` is the entry's features at its last rerank (the inputs the choice was made on); an
        entry injected without a rerank (ids passed in by hand) is described against the last
        reranked query, or skipped when there was none.
        """
        y = 2.0 * float(reward) - 1.0
        for m in injected:
            v = self.pending.get(m.id)
            if v is None:
                if self.last_q is None:
                    continue
                v = self.features(self.last_q, [m], m.embedding[None, :], step)[0]
            self.learner.learn_one(dict(zip(self.columns, v.tolist(), strict=True)), y)
            m.stats[STAT_N] = m.stats.get(STAT_N, 0.0) + 1.0
            m.stats[STAT_Y] = m.stats.get(STAT_Y, 0.0) + y
        self.pending = {}

    def probe_worth(
        self, entries: list[Entry], E: np.ndarray, step: int, probes: np.ndarray | None = None
    ) -> np.ndarray:
        """Worth of each entry under each probe query, shape (n, p).

        Probes default to the FIFO of recent queries. With none seen yet, each entry is scored
        against its own embedding (p = 1): relevance is then 1 for all, and only the execution
        statistics and the residual tell entries apart. Same values as
        :func:`~memcurator.value.tokenworth_lifecycle.probe_worths`.
        """
        n = len(entries)
        E = np.asarray(E, dtype=np.float64).reshape(n, self.dim)
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

    def probe_matrix(self) -> np.ndarray:
        return np.vstack(list(self.probes)) if self.probes else np.zeros((0, self.dim))

    def state(self) -> dict[str, Any]:
        return {
            "learner": self.learner.state(),
            "probes": _pack(self.probe_matrix()),
            "last_q": _pack(self.last_q),
        }

    def load_state(self, st: Mapping[str, Any]) -> None:
        self.learner.load_state(st["learner"])
        self.probes.clear()
        P = _unpack(st["probes"])
        if P is not None:
            self.probes.extend(row.copy() for row in P)
        self.last_q = _unpack(st["last_q"])
        self.pending = {}


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


class TokenWorth(Policy):
    """TokenWorth (Sec. 4): learned worth ranks recall; coverage–quality lifecycle keeps the bank.

    Parameters
    ----------
    capacity : int, default 64
        ``B_max``, the most records resident (a count; the memory's ``max_bytes`` applies as
        well). The paper uses 50 (DB, BigCodeBench) and 128 (ALFWorld).
    k_max : int or None, default 1
        ``K_max``: at most this many memories come out of a recall (the rest of the pool gets a
        score of ``-inf``, which the memory never ranks). None leaves ``k`` to the caller.
    n_probes : int, default 8
        ``P``: the probe queries of the probe-averaged worth are the last ``P`` query embeddings
        seen by :meth:`observe_query` (a FIFO; the current task's query included). Before any
        query, a candidate is probed with its own embedding and each resident with its own.
    tau_nov, delta_write, tau_pos, delta_rep : float, default 0.35, 0.02, 0.45, 0.10
        Admission / replacement thresholds of the full bank (App. B.2); see
        :class:`~memcurator.value.tokenworth_lifecycle.WriteParams`.
    replace_k : int, default 1
        The replaced "nearest low-utility neighbour" is the lowest-worth resident among the
        ``replace_k`` nearest by cosine.
    n_blocks : int, default 16
        Residual pair features (see :func:`~memcurator.value.tokenworth.features`).
    kappa : float, default 0.02, per step
        Recency decay rate κ of the base feature ``exp(-κ · age)``.
    residual : bool, default True
        False is the ``tokenworth/base-only`` ablation.
    agop : bool, default True
        False is ``tokenworth/no-agop`` (RFM with fixed metric ``M = I``).
    learner_params : dict or None, default None
        Any other :class:`~memcurator.value.tokenworth.TokenWorthLearner` hyperparameter
        (``w0``, ``base_every``, ``krr_every``, ``agop_every``, windows, ``eta_max``, ...);
        the paper's values by default.
    seed : int or None, default 0
        Passed to the learner (which draws no random numbers); the policy is deterministic.

    Notes
    -----
    Recall ranks the pool the memory hands over (``Memory.candidates`` BM25 and dense candidates
    fused, up to 2·K_c) rather than BM25's top K_c = 12 alone. Each candidate's score is the
    learned worth of (query, memory), whose base relevance feature is their cosine.

    Feedback: only the injected memories learn, from ``y = 2 · reward − 1`` (a failure is a
    negative example); ``Entry.stats["tw_n"]`` counts the examples an entry contributed and
    ``["tw_y"]`` sums their ``y``. Only successful trajectories are written (``Memory.record``).

    Bank: while fewer than ``capacity`` records are resident, a write is admitted for coverage.
    When full, :func:`~memcurator.value.tokenworth_lifecycle.decide_write` admits a novel or a
    clearly better candidate, naming the lowest-worth resident as the victim, or lets it replace
    its nearest low-utility neighbour, or rejects it. The victim leaves through :meth:`victims`,
    which the memory calls after every admitted write and logs as ``evict`` with the reason.
    Under byte pressure the memory evicts by :meth:`priority`, the probe-averaged worth.

    Examples
    --------
    >>> pol = TokenWorth(capacity=50, residual=False)
    >>> pol.clone().get_params()["capacity"], pol.form
    (50, 'insight')
    """

    name = "tokenworth"
    bounded = True
    distills = False
    form = "insight"

    def __init__(
        self,
        capacity: int = 64,
        k_max: int | None = 1,
        n_probes: int = 8,
        tau_nov: float = 0.35,
        delta_write: float = 0.02,
        tau_pos: float = 0.45,
        delta_rep: float = 0.10,
        replace_k: int = 1,
        n_blocks: int = 16,
        kappa: float = 0.02,
        residual: bool = True,
        agop: bool = True,
        learner_params: dict[str, Any] | None = None,
        seed: int | None = 0,
    ):
        self.capacity = capacity
        self.k_max = k_max
        self.n_probes = n_probes
        self.tau_nov = tau_nov
        self.delta_write = delta_write
        self.tau_pos = tau_pos
        self.delta_rep = delta_rep
        self.replace_k = replace_k
        self.n_blocks = n_blocks
        self.kappa = kappa
        self.residual = residual
        self.agop = agop
        self.learner_params = learner_params
        self.seed = seed
        _pos_int("capacity", capacity)
        _pos_int("n_probes", n_probes)
        if k_max is not None:
            _pos_int("k_max", k_max)
        self._params = WriteParams(tau_nov, delta_write, tau_pos, delta_rep, replace_k)
        _make_learner(residual, agop, learner_params, seed)  # validate now, not at attach
        self._victims: list[tuple[str, float, str]] = []

    def attach(self, dim: int) -> None:
        super().attach(dim)
        learner = _make_learner(self.residual, self.agop, self.learner_params, self.seed)
        self._worth = _WorthModel(dim, self.n_probes, self.n_blocks, self.kappa, learner)
        self._victims = []

    @property
    def learner(self) -> TokenWorthLearner:
        """The fitted learner (read it; do not train it by hand)."""
        return self._worth.learner

    # --- profile -------------------------------------------------------------------
    def observe_query(self, e_q: np.ndarray) -> None:
        self._worth.observe(e_q)

    def feedback(self, reward: float, injected: list[Entry], step: int) -> None:
        self._worth.learn(reward, injected, step)

    # --- recall --------------------------------------------------------------------
    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> np.ndarray:
        w = self._worth.rank(candidates, e_q, step)
        if self.k_max is not None and len(w) > self.k_max:
            drop = np.argsort(-w, kind="stable")[self.k_max :]
            w = w.copy()
            w[drop] = -np.inf
        return w

    # --- write / keep --------------------------------------------------------------
    def admit(
        self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int
    ) -> tuple[bool, float, str]:
        wm = self._worth
        probes = wm.probe_matrix()
        if not len(probes):
            probes = np.asarray(candidate.embedding, dtype=np.float64)[None, :]
        cw = wm.probe_worth([candidate], candidate.embedding[None, :], step, probes)[0]
        n = len(resident)
        full = n >= self.capacity
        bw = wm.probe_worth(resident, E, step, probes) if full else np.zeros(n)
        d = decide_write(
            candidate.embedding,
            cw,
            np.asarray(E, dtype=np.float64).reshape(n, self._dim),
            bw,
            self.capacity,
            params=self._params,
        )
        if d.action == "reject":
            return False, d.score, d.reason
        if d.victim_index is None:
            return True, d.score, d.reason
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
                f"({n}/{self.capacity}); made room for {candidate.id}"
            )
            reason = f"{d.reason}; victim {v.id}"
        self._victims = [(v.id, vw, why)]  # one per admission; Memory asks right after
        return True, d.score, reason

    def victims(
        self, entries: list[Entry], E: np.ndarray, step: int
    ) -> list[tuple[str, float, str]]:
        """Entries to evict now regardless of bytes: ``(id, score, reason)`` each.

        The victim named by the last admission, then, if the bank still holds more than
        ``capacity`` records (reopened with a smaller capacity), the lowest-worth extras.
        """
        ids = {m.id for m in entries}
        out = [v for v in self._victims if v[0] in ids]
        self._victims = []
        extra = len(entries) - len(out) - self.capacity
        if extra > 0:
            chosen = {v[0] for v in out}
            rest = [i for i, m in enumerate(entries) if m.id not in chosen]
            w = self._worth.probe_worth([entries[i] for i in rest], np.asarray(E)[rest], step).mean(
                axis=1
            )
            for j in np.argsort(w, kind="stable")[:extra]:
                m = entries[rest[j]]
                out.append(
                    (
                        m.id,
                        float(w[j]),
                        f"lowest probe-averaged worth ({w[j]:.3f}) over capacity {self.capacity}",
                    )
                )
        return out

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        pr = self._worth.probe_worth(entries, E, step).mean(axis=1)
        doomed = {v[0] for v in self._victims}
        return np.array(
            [-np.inf if m.id in doomed else p for m, p in zip(entries, pr, strict=True)]
        )

    def evict_reason(self) -> str:
        return "lowest probe-averaged TokenWorth worth when the byte budget was full"

    # --- persistence -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"worth": self._worth.state(), "victims": [list(v) for v in self._victims]}

    def load_state(self, state: dict[str, Any]) -> None:
        if "worth" in state:
            self._worth.load_state(state["worth"])
        self._victims = [(str(i), float(s), str(r)) for i, s, r in state.get("victims", [])]


class _WorthScorer(CuratorScorer):
    """CURATOR's scorer whose helpfulness q(m) comes from a callable over the entries."""

    def __init__(self, q_of: Any, **kw: Any):
        super().__init__(**kw)
        self._q_of = q_of

    def entry_arrays(self, entries: list[Entry]) -> dict[str, np.ndarray]:
        arr = super().entry_arrays(entries)
        if entries:
            arr["q"] = self._q_of(entries)
        return arr


class CuratorWorth(Curator):
    """``curator+worth``: CURATOR's ρ with TokenWorth's learned worth as helpfulness q(m).

    q(m) is the learner's probe-averaged worth of m (probes as in :class:`TokenWorth`), clipped
    to [-1, 1] (the learner's unit is the signed reward, so in-range worths pass unchanged);
    it replaces CURATOR's :class:`~memcurator.value.helpfulness.MarginalUtility` in
    ``V = p · q · a`` and so in ρ for Keep and Trust. Recall ranks by the learned query-dependent
    worth of (query, memory), like TokenWorth (no ``beta_q``: the worth already carries the
    cosine). Feedback trains the learner on the injected entries only, ``y = 2 · reward − 1``.

    Parameters
    ----------
    lam, kappa, phi, propensity, provenance_weights, use_propensity, use_helpfulness, \
use_abstraction, use_negative_transfer, use_provenance, per_byte, theta, distill, energy_budget, \
nu :
        As in :class:`~memcurator.policy.curator.Curator`.
    n_probes : int, default 8
        Probe queries for q(m): the last ``n_probes`` query embeddings.
    n_blocks : int, default 16
    worth_kappa : float, default 0.02, per step
        TokenWorth's recency rate κ (``kappa`` is CURATOR's retrieval temperature).
    residual, agop : bool, default True
    learner_params : dict or None
    seed : int or None, default 0
        As in :class:`TokenWorth`.

    Examples
    --------
    >>> CuratorWorth(residual=False).clone().get_params()["residual"]
    False
    """

    name = "curator+worth"

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
        distill: bool = True,
        energy_budget: float | None = None,
        nu: float = 1e6,
        n_probes: int = 8,
        n_blocks: int = 16,
        worth_kappa: float = 0.02,
        residual: bool = True,
        agop: bool = True,
        learner_params: dict[str, Any] | None = None,
        seed: int | None = 0,
    ):
        super().__init__(
            lam=lam,
            kappa=kappa,
            phi=phi,
            propensity=propensity,
            provenance_weights=provenance_weights,
            use_propensity=use_propensity,
            use_helpfulness=use_helpfulness,
            use_abstraction=use_abstraction,
            use_negative_transfer=use_negative_transfer,
            use_provenance=use_provenance,
            per_byte=per_byte,
            theta=theta,
            distill=distill,
            energy_budget=energy_budget,
            nu=nu,
        )
        self.n_probes = n_probes
        self.n_blocks = n_blocks
        self.worth_kappa = worth_kappa
        self.residual = residual
        self.agop = agop
        self.learner_params = learner_params
        self.seed = seed
        _pos_int("n_probes", n_probes)
        _make_learner(residual, agop, learner_params, seed)
        self._step = 0

    def attach(self, dim: int) -> None:
        super().attach(dim)  # CURATOR's scorer and energy queue, exactly as Curator builds them
        learner = _make_learner(self.residual, self.agop, self.learner_params, self.seed)
        self._worth = _WorthModel(dim, self.n_probes, self.n_blocks, self.worth_kappa, learner)
        # The same scorer, with q(m) read from the learner (CuratorScorer keeps its arguments).
        base = self.scorer
        names = [k for k in inspect.signature(CuratorScorer.__init__).parameters if k != "self"]
        self.scorer = _WorthScorer(self._q, **{k: getattr(base, k) for k in names})

    @property
    def learner(self) -> TokenWorthLearner:
        return self._worth.learner

    def _q(self, entries: list[Entry]) -> np.ndarray:
        """q(m) = clip(probe-averaged learned worth, -1, 1), shape (n,)."""
        E = np.vstack([m.embedding for m in entries])
        w = self._worth.probe_worth(entries, E, self._step).mean(axis=1)
        return np.clip(w, -1.0, 1.0)

    def observe_query(self, e_q: np.ndarray) -> None:
        super().observe_query(e_q)
        self._worth.observe(e_q)

    def feedback(self, reward: float, injected: list[Entry], step: int) -> None:
        self._step = step
        self._worth.learn(reward, injected, step)

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        self._step = step
        return super().priority(entries, E, step)

    def admit(
        self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int
    ) -> tuple[bool, float, str]:
        self._step = step
        return super().admit(candidate, resident, E, step)

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> np.ndarray:
        self._step = step
        return self._worth.rank(candidates, e_q, step)

    def evict_reason(self) -> str:
        return "lowest net-value density rho (q = learned worth) when the byte budget was full"

    def state(self) -> dict[str, Any]:
        return {**super().state(), "worth": self._worth.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        if "worth" in state:
            self._worth.load_state(state["worth"])
