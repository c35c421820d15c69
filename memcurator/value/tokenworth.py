"""TokenWorth: query-dependent memory worth, a linear base scorer plus an RFM residual.

The worth of memory ``m`` for query ``q`` at feedback count ``t`` is

    worth_t(q, m) = w_t · φ(q, m) + η_t · r_t(z(q, m)),   η_t = η_max · min(1, u_t / 3)

where ``φ`` are four interpretable query–memory features (:data:`BASE_FEATURES`), ``w_t`` is a
prior-regularized linear scorer, ``r_t`` is a kernel ridge regression (KRR) on the base scorer's
residuals with a Laplacian kernel under a learned diagonal metric ``M`` (a Recursive Feature
Machine, RFM), ``z`` is the residual input and ``u_t`` counts completed KRR fits.

References
----------
TokenWorth, Sec. 4.2 (linear base + residual worth), Sec. 4.3 (two-timescale RFM: fast KRR,
slow AGOP), App. B.1 ("Online learning configuration") and App. B.2 (hyperparameters
``w0 = [1.0, 0.10, 0.10, 0.02]``, ``λ_w = 0.1``, ``β_w = 0.5``, ``λ_KRR = 0.01``, ``γ = 1``,
``β_M = 0.25``, ``κ = 0.02``; windows 256 / 128 / 256; schedules 50 / 75 / 225 examples).
Radhakrishnan et al., "Mechanism for feature learning in neural networks and backpropagation-free
machine learning models", Science 2024 (RFM, AGOP).
"""

from __future__ import annotations

import base64
import inspect
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from memcurator.errors import InvalidInput

__all__ = [
    "BASE_FEATURES",
    "MemoryStats",
    "TokenWorthLearner",
    "features",
    "features_array",
    "features_many",
    "pair_feature_names",
]

#: The four base features, in the order of the prior ``w0`` (TokenWorth, App. B.2).
#:
#: - ``relevance``: cosine(q, m) in [-1, 1]. Semantic match is the dominant signal after BM25
#:   recall, hence the prior weight 1.0.
#: - ``success``: Beta(1, 1)-smoothed success rate mapped to [-1, 1],
#:   ``(s - f) / (s + f + 2)``; 0 for a never-judged memory, so the prior neither rewards nor
#:   punishes novelty. Prior weight 0.10.
#: - ``usage``: ``log1p(uses)``; a memory that keeps being selected has been vetted by the scorer
#:   itself, with diminishing returns. Prior weight 0.10.
#: - ``recency``: ``exp(-κ · age)`` in (0, 1] with ``κ = 0.02`` per step (half-life about 35
#:   steps), a small tie-breaker toward fresh experience under drift. Prior weight 0.02.
BASE_FEATURES: tuple[str, ...] = ("relevance", "success", "usage", "recency")


#: Preset names mapped to constructor arguments (the ablations of TokenWorth, Fig. 3(b)).
class MemoryStats(NamedTuple):
    """Execution-derived statistics of one memory (TokenWorth, App. B.1).

    Attributes
    ----------
    successes, failures : int
        Outcomes of the tasks into which the memory was injected.
    uses : int
        Times injected.
    age : float, steps
        Logical steps (tasks) since the memory was last touched; see :meth:`from_entry`.
    """

    successes: int = 0
    failures: int = 0
    uses: int = 0
    age: float = 0.0

    @classmethod
    def from_entry(cls, entry: Any, step: int) -> MemoryStats:
        """Statistics of a :class:`memcurator.types.Entry` at logical time ``step``.

        ``age = step - max(created_step, last_used_step)``: steps since creation or last
        injection, whichever is later (clipped at 0).
        """
        last = max(int(entry.created_step), int(entry.last_used_step))
        return cls(int(entry.successes), int(entry.failures), int(entry.uses), max(0, step - last))


def pair_feature_names(n_blocks: int) -> list[str]:
    """Names of the residual pair features: ``pair_00``, ``pair_01``, ...

    Zero-padded so that sorting by name keeps block order.
    """
    width = max(2, len(str(n_blocks - 1)))
    return [f"pair_{i:0{width}d}" for i in range(n_blocks)]


_STAT_NAMES = ("successes", "failures", "uses", "age")


def _stat(stats: Any, name: str) -> float:
    v = stats.get(name) if isinstance(stats, Mapping) else getattr(stats, name, None)
    if v is None:
        raise InvalidInput(f"memory statistics lack {name!r} (need successes, failures, uses, age)")
    try:
        f = float(v)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"memory statistic {name!r} must be a number, got {v!r}") from exc
    if not math.isfinite(f) or f < 0:
        raise InvalidInput(f"memory statistic {name!r} must be finite and >= 0, got {v!r}")
    return f


def _stats_matrix(stats: Sequence[Any]) -> np.ndarray:
    """Statistics as an (n, 4) float array; fast for MemoryStats, exact errors otherwise."""
    try:
        rows = [
            tuple(st)
            if isinstance(st, MemoryStats)
            else tuple(st[k] if isinstance(st, Mapping) else getattr(st, k) for k in _STAT_NAMES)
            for st in stats
        ]
        S = np.array(rows, dtype=np.float64).reshape(len(rows), 4)
        ok = bool(np.all(np.isfinite(S)) and np.all(S >= 0))
    except (KeyError, AttributeError, TypeError, ValueError):
        ok = False
    if not ok:  # slow path, only to name the culprit
        for st in stats:
            for k in _STAT_NAMES:
                _stat(st, k)
        raise InvalidInput("memory statistics must be finite numbers >= 0")
    return S


def _as_matrix(a: Any, name: str, ndim: int) -> np.ndarray:
    arr = np.array(a, dtype=np.float64)  # a copy: never alias the caller's array
    if arr.ndim != ndim:
        raise InvalidInput(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInput(f"{name} contains NaN or infinity")
    return arr


def _unit_rows(a: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(a, axis=-1, keepdims=True)
    return np.divide(a, n, out=np.zeros_like(a), where=n > 0)


def features_many(
    query_emb: Any,
    mem_embs: Any,
    stats: Sequence[Any],
    *,
    n_blocks: int = 16,
    kappa: float = 0.02,
) -> list[dict[str, float]]:
    """Learner inputs for one query against ``n`` memories (vectorized :func:`features`).

    Parameters
    ----------
    query_emb : array-like of shape (d,)
    mem_embs : array-like of shape (n, d)
    stats : sequence of length n
        One :class:`MemoryStats` (or mapping / object with ``successes``, ``failures``,
        ``uses``, ``age``) per memory.
    n_blocks : int, default 16
        Number of residual pair features (see :func:`features`).
    kappa : float, default 0.02, per step
        Recency decay rate κ.

    Returns
    -------
    list of dict, length n
        Each with keys :data:`BASE_FEATURES` followed by ``pair_feature_names(n_blocks)``.

    Raises
    ------
    InvalidInput
        On shape mismatch, NaN, negative statistics, or ``n_blocks`` outside ``[1, d]``.
    """
    V = features_array(query_emb, mem_embs, stats, n_blocks=n_blocks, kappa=kappa)
    names = list(BASE_FEATURES) + pair_feature_names(int(n_blocks))
    return [dict(zip(names, row, strict=True)) for row in V.tolist()]


def features_array(
    query_emb: Any,
    mem_embs: Any,
    stats: Sequence[Any],
    *,
    n_blocks: int = 16,
    kappa: float = 0.02,
) -> np.ndarray:
    """:func:`features_many` as one array, for :meth:`TokenWorthLearner.score_array`.

    Same parameters and errors as :func:`features_many`, without building dicts.

    Returns
    -------
    ndarray of shape (n, 4 + n_blocks), float64
        Columns ``BASE_FEATURES + pair_feature_names(n_blocks)``: the key order of
        :func:`features_many`, and so the residual layout of a learner fitted on its dicts.

    Raises
    ------
    InvalidInput
        On shape mismatch, NaN, negative statistics, or ``n_blocks`` outside ``[1, d]``.

    Examples
    --------
    >>> q = np.array([1.0, 0.0, 0.0, 0.0]); m = np.array([[1.0, 1.0, 0.0, 0.0]])
    >>> st = [MemoryStats(successes=3, failures=1, uses=4, age=0)]
    >>> V = features_array(q, m, st, n_blocks=2)
    >>> V.shape, bool(np.allclose(V[0], list(features(q, m[0], st[0], n_blocks=2).values())))
    ((1, 6), True)
    """
    q = _as_matrix(query_emb, "query_emb", 1)
    m = _as_matrix(mem_embs, "mem_embs", 2)
    d = q.shape[0]
    if m.shape[1] != d:
        raise InvalidInput(f"mem_embs has dimension {m.shape[1]}, query_emb has {d}")
    if len(stats) != m.shape[0]:
        raise InvalidInput(f"got {len(stats)} statistics for {m.shape[0]} memories")
    if not 1 <= int(n_blocks) <= d:
        raise InvalidInput(f"n_blocks must be in [1, {d}], got {n_blocks!r}")
    if not (math.isfinite(kappa) and kappa >= 0):
        raise InvalidInput(f"kappa must be finite and >= 0, got {kappa!r}")
    qn = _unit_rows(q[None, :])[0]
    prod = _unit_rows(m) * qn[None, :]  # (n, d): q̂ ⊙ m̂, sums to cosine
    bounds = np.linspace(0, d, int(n_blocks) + 1).astype(int)
    blocks = np.add.reduceat(prod, bounds[:-1], axis=1) if m.shape[0] else prod[:, :n_blocks]
    rel = prod.sum(axis=1)
    S = _stats_matrix(stats)  # (n, 4): successes, failures, uses, age
    base = np.column_stack(
        [
            rel,
            (S[:, 0] - S[:, 1]) / (S[:, 0] + S[:, 1] + 2.0),
            np.log1p(S[:, 2]),
            np.exp(-float(kappa) * S[:, 3]),
        ]
    )
    return np.hstack([base, blocks])


def features(
    query_emb: Any, mem_emb: Any, stats: Any, *, n_blocks: int = 16, kappa: float = 0.02
) -> dict[str, float]:
    """The learner's input ``x`` for one (query, memory) pair.

    Base features (:data:`BASE_FEATURES`, TokenWorth Sec. 4.2): ``relevance = cos(q, m)``,
    ``success = (s - f) / (s + f + 2)``, ``usage = log1p(uses)``, ``recency = exp(-κ · age)``.

    Residual pair features ``pair_00 … pair_{n_blocks-1}``: the elementwise product of the
    L2-normalized embeddings ``q̂ ⊙ m̂`` summed over ``n_blocks`` contiguous, equal blocks of
    dimensions, i.e. partial cosines (they sum to ``relevance``). With the hashing embedder each
    block is a fixed pseudo-random subset of token / n-gram buckets, so the residual RFM can learn
    *which* kinds of overlap matter for worth, and AGOP can say which blocks it uses. Set
    ``n_blocks = d`` for the raw product. The paper's exact residual input was lost in extraction
    (App. B.1); this is our documented choice.

    Parameters
    ----------
    query_emb : array-like of shape (d,)
    mem_emb : array-like of shape (d,)
    stats : MemoryStats or mapping
        ``successes``, ``failures``, ``uses`` (counts) and ``age`` (steps).
    n_blocks : int, default 16
    kappa : float, default 0.02, per step
        Recency decay rate; we read App. B.2's ``κ = 0.02`` as this rate.

    Returns
    -------
    dict of str to float
        ``4 + n_blocks`` entries.

    Raises
    ------
    InvalidInput
        On NaN, mismatched dimensions or bad statistics.

    Examples
    --------
    >>> q = np.array([1.0, 0.0, 0.0, 0.0]); m = np.array([1.0, 1.0, 0.0, 0.0])
    >>> x = features(q, m, MemoryStats(successes=3, failures=1, uses=4, age=0), n_blocks=2)
    >>> sorted(x)
    ['pair_00', 'pair_01', 'recency', 'relevance', 'success', 'usage']
    >>> round(x["relevance"], 4), round(x["success"], 4), x["recency"]
    (0.7071, 0.3333, 1.0)
    """
    m = _as_matrix(mem_emb, "mem_emb", 1)
    return features_many(query_emb, m[None, :], [stats], n_blocks=n_blocks, kappa=kappa)[0]


def _check_y(y: Any) -> float:
    if isinstance(y, bool) or not isinstance(y, int | float | np.integer | np.floating):
        raise InvalidInput(f"target y must be a real number, got {type(y).__name__}")
    f = float(y)
    if not math.isfinite(f):
        raise InvalidInput(f"target y must be finite, got {y!r}")
    return f


class TokenWorthLearner:
    """Online query-dependent memory worth: linear base + η_t · RFM residual (river API).

    Parameters
    ----------
    w0 : sequence of float, default (1.0, 0.10, 0.10, 0.02)
        Informative prior of the base weights, aligned with ``base_features`` (App. B.2).
    lambda_w : float, default 0.1
        Ridge strength pulling the base fit toward ``w0``.
    beta_w : float, default 0.5
        Base smoothing: ``w ← (1 - β_w) · w + β_w · w_fit``.
    base_every : int, default 50
        Refit the base scorer every this many feedback examples ...
    base_window : int, default 256
        ... on a FIFO of the latest this many examples.
    base_loss : {"mean", "sum"}, default "mean"
        The base fit minimizes ``L(w) + λ_w · ||w - w0||²`` with ``L`` the mean (default) or sum
        of squared errors over the window. Not stated in the paper; "mean" keeps the prior's pull
        independent of the window fill.
    residual : bool, default True
        False gives the ``tokenworth/base-only`` ablation (η_t = 0, no KRR).
    gamma : float, default 1.0
        Laplacian kernel scale: ``k(z, z') = exp(-γ · ||z - z'||_M)``,
        ``||a||_M = sqrt(Σ_i M_i a_i²)``.
    lambda_krr : float, default 0.01
        KRR ridge: ``α = (K + λ I)⁻¹ r``.
    krr_every : int, default 75
        Fast timescale: refit KRR every this many examples ...
    krr_window : int, default 128
        ... on the latest this many examples, against the *current* base scorer's residuals.
    agop : bool, default True
        False keeps ``M = I`` (the ``tokenworth/no-agop`` ablation, "Base + RFM" in Fig. 3(b)).
    agop_every : int, default 225
        Slow timescale: update ``M`` every this many examples ...
    agop_window : int, default 256
        ... from the diagonal of the average gradient outer product (AGOP) of the freshly fitted
        KRR predictor over the latest this many inputs, then refit KRR at once.
    beta_m : float, default 0.25
        Metric smoothing ``M ← (1 - β_M) · M + β_M · G / mean(G)``, then clipped and normalized.
    metric_bounds : tuple of float, default (0.05, 8.0)
        Clip range of the diagonal metric, applied before normalizing it to mean one.
    eta_max : float, default 0.10
        Cap of the residual coefficient.
    eta_ramp : int, default 3
        ``η_t = eta_max · min(1, u_t / eta_ramp)``, ``u_t`` = completed KRR fits (each AGOP
        refit counts as one).
    min_fit : int, default 4
        A scheduled fit is skipped when its window holds fewer examples. It never triggers a fit
        off schedule.
    base_features : sequence of str, default BASE_FEATURES
        Keys of ``x`` used by the base scorer, aligned with ``w0``.
    standardize : bool, default True
        Residual inputs are centred and scaled per coordinate to variance ``1 / D`` (``D`` the
        residual dimension) with the statistics of the KRR window at each fit, so that
        ``E ||z - z'||² ≈ 2`` and the paper's ``γ = 1`` is a sensible bandwidth whatever the
        feature units. Not stated in the paper (our choice); False uses raw values.
    seed : int or None, default None
        Kept for API uniformity (STYLE.md rule 2). The learner draws no random numbers, so the
        same data give the same scores under any seed.

    Notes
    -----
    Inputs ``x`` are dicts of finite numbers (see :func:`features`). The residual input ``z`` is
    ``base_features`` followed by all other keys of the first learned ``x`` in sorted order; from
    then on every ``x`` must carry exactly those keys. ``y`` is the observed outcome of the
    injected memory; we recommend the signed reward ``2 · reward - 1`` in [-1, 1], so that
    ``worth > 0`` reads "predicted to help" (the lifecycle's positive-score ratio relies on it).
    Updates at the same example run in the order base refit, KRR fit, AGOP update + KRR refit.

    Shapes: ``w0`` (4,), learned metric (D,), KRR coefficients (≤ krr_window,).

    References
    ----------
    TokenWorth, Sec. 4.2 (prior-regularized base scorer, residual worth estimation), Sec. 4.3
    (two-timescale RFM), App. B.2 and App. B.1 "Online learning configuration".

    Examples
    --------
    >>> learner = TokenWorthLearner(base_every=10, krr_every=15, agop_every=45)
    >>> x = {"relevance": 0.8, "success": 0.5, "usage": 1.0, "recency": 0.9, "pair_00": 0.1}
    >>> round(learner.score_one(x), 4)   # the prior: 0.8 + 0.05 + 0.1 + 0.018
    0.968
    >>> for i in range(45):
    ...     xi = dict(x, relevance=(i % 9) / 9, pair_00=(i % 5) / 5)
    ...     learner.learn_one(xi, 1.0 if xi["pair_00"] > 0.5 else -1.0)
    >>> learner.n_krr_fits, round(learner.eta, 3)
    (4, 0.1)
    >>> learner.score_one(dict(x, pair_00=0.8)) > learner.score_one(dict(x, pair_00=0.0))
    True
    """

    def __init__(
        self,
        w0: Sequence[float] = (1.0, 0.10, 0.10, 0.02),
        lambda_w: float = 0.1,
        beta_w: float = 0.5,
        base_every: int = 50,
        base_window: int = 256,
        base_loss: str = "mean",
        residual: bool = True,
        gamma: float = 1.0,
        lambda_krr: float = 0.01,
        krr_every: int = 75,
        krr_window: int = 128,
        agop: bool = True,
        agop_every: int = 225,
        agop_window: int = 256,
        beta_m: float = 0.25,
        metric_bounds: tuple[float, float] = (0.05, 8.0),
        eta_max: float = 0.10,
        eta_ramp: int = 3,
        min_fit: int = 4,
        base_features: Sequence[str] = BASE_FEATURES,
        standardize: bool = True,
        seed: int | None = None,
    ):
        self.w0 = w0
        self.lambda_w = lambda_w
        self.beta_w = beta_w
        self.base_every = base_every
        self.base_window = base_window
        self.base_loss = base_loss
        self.residual = residual
        self.gamma = gamma
        self.lambda_krr = lambda_krr
        self.krr_every = krr_every
        self.krr_window = krr_window
        self.agop = agop
        self.agop_every = agop_every
        self.agop_window = agop_window
        self.beta_m = beta_m
        self.metric_bounds = metric_bounds
        self.eta_max = eta_max
        self.eta_ramp = eta_ramp
        self.min_fit = min_fit
        self.base_features = base_features
        self.standardize = standardize
        self.seed = seed
        self._validate_params()

        self._base_keys: tuple[str, ...] = tuple(base_features)
        self._w = np.array(w0, dtype=np.float64)
        self._keys: tuple[str, ...] | None = None  # residual input layout, frozen at first learn
        keep = max(base_window, krr_window, agop_window)
        self._X: deque[np.ndarray] = deque(maxlen=keep)
        self._y: deque[float] = deque(maxlen=keep)
        self._n = 0
        self._u = 0  # completed KRR fits
        self._M: np.ndarray | None = None  # diagonal metric (D,)
        self._Z: np.ndarray | None = None  # KRR training inputs, standardized, (n, D)
        self._alpha: np.ndarray | None = None  # KRR coefficients (n,)
        self._mu: np.ndarray | None = None
        self._scale: np.ndarray | None = None

    # ------------------------------------------------------------------ parameters
    def _validate_params(self) -> None:
        def pos_int(name: str) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidInput(f"{name} must be a positive int, got {v!r}")

        for name in (
            "base_every",
            "base_window",
            "krr_every",
            "krr_window",
            "agop_every",
            "agop_window",
            "eta_ramp",
            "min_fit",
        ):
            pos_int(name)
        for name in ("lambda_w", "lambda_krr", "gamma", "eta_max"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise InvalidInput(f"{name} must be a finite number >= 0, got {v!r}")
        if self.gamma <= 0:
            raise InvalidInput(f"gamma must be > 0, got {self.gamma!r}")
        for name in ("beta_w", "beta_m"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and 0 <= v <= 1):
                raise InvalidInput(f"{name} must be in [0, 1], got {v!r}")
        lo, hi = self.metric_bounds
        if not 0 < lo <= 1 <= hi:
            raise InvalidInput(f"metric_bounds must satisfy 0 < lo <= 1 <= hi, got {(lo, hi)!r}")
        if self.base_loss not in ("mean", "sum"):
            raise InvalidInput(f"base_loss must be 'mean' or 'sum', got {self.base_loss!r}")
        if len(tuple(self.w0)) != len(tuple(self.base_features)):
            raise InvalidInput(
                f"w0 has {len(tuple(self.w0))} weights for {len(tuple(self.base_features))} "
                "base features"
            )
        if not all(math.isfinite(float(v)) for v in self.w0):
            raise InvalidInput(f"w0 must be finite, got {self.w0!r}")

    def _get_params(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in inspect.signature(type(self).__init__).parameters
            if k != "self"
        }

    def clone(self, **overrides: Any) -> TokenWorthLearner:
        """A fresh, unfitted learner with the same hyperparameters (and ``overrides``)."""
        return type(self)(**{**self._get_params(), **overrides})

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__).parameters
        changed = [f"{k}={v!r}" for k, v in self._get_params().items() if v != sig[k].default]
        return f"{type(self).__name__}({', '.join(changed)})"

    # ------------------------------------------------------------------ inspection
    @property
    def n_seen(self) -> int:
        """Feedback examples learned so far."""
        return self._n

    @property
    def n_krr_fits(self) -> int:
        """Completed KRR fits ``u_t``."""
        return self._u

    @property
    def eta(self) -> float:
        """Current residual coefficient ``η_t`` (0 when ``residual=False``)."""
        if not self.residual:
            return 0.0
        return float(self.eta_max) * min(1.0, self._u / self.eta_ramp)

    @property
    def base_weights(self) -> dict[str, float]:
        """Current base weights ``w_t`` by feature name (a copy)."""
        return dict(zip(self._base_keys, self._w.tolist(), strict=True))

    @property
    def residual_features(self) -> tuple[str, ...]:
        """Layout of the residual input ``z`` (empty before the first ``learn_one``)."""
        return self._keys or ()

    @property
    def metric(self) -> dict[str, float]:
        """Diagonal metric ``M`` by residual feature (all ones until the first AGOP update)."""
        keys = self.residual_features
        m = self._M if self._M is not None else np.ones(len(keys))
        return dict(zip(keys, m.tolist(), strict=True))

    # ------------------------------------------------------------------ input handling
    def _matrix(self, xs: Sequence[Any], keys: Sequence[str], exact: bool) -> np.ndarray:
        """Rows of ``xs`` in layout ``keys``, shape (n, len(keys)); copies, never aliases."""
        rows = []
        nk = len(keys)
        for x in xs:
            if not isinstance(x, Mapping):
                raise InvalidInput(
                    f"x must be a mapping of feature name to number, got {type(x).__name__}"
                )
            try:
                rows.append([x[k] for k in keys])
            except KeyError:
                missing = [k for k in keys if k not in x]
                raise InvalidInput(f"x lacks feature(s) {missing}; expected {list(keys)}") from None
            if exact and len(x) != nk:
                extra = sorted(set(x) - set(keys), key=str)
                raise InvalidInput(
                    f"x has unknown feature(s) {extra}; this learner was fitted on {list(keys)}"
                )
        try:
            V = np.array(rows, dtype=np.float64).reshape(len(rows), nk)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"features of x must be real numbers: {exc}") from None
        if not np.all(np.isfinite(V)):
            i, j = np.argwhere(~np.isfinite(V))[0]
            raise InvalidInput(f"feature {keys[j]!r} of input #{i} is {V[i, j]}")
        return V

    def _layout_for(self, x: Any) -> tuple[str, ...]:
        """Residual layout: frozen after the first ``learn_one``, else derived from ``x``."""
        if self._keys is not None:
            return self._keys
        if not isinstance(x, Mapping):
            raise InvalidInput(f"x must be a mapping, got {type(x).__name__}")
        others = sorted(k for k in x if k not in self._base_keys)
        return self._base_keys + tuple(others)

    # ------------------------------------------------------------------ scoring
    def _predict(self, V: np.ndarray) -> np.ndarray:
        """Worth of rows of ``V`` (shape (n, D) in layout ``self._keys`` or (n, 4) base only)."""
        out = V[:, : len(self._base_keys)] @ self._w
        eta = self.eta
        if eta > 0 and self._alpha is not None and self._Z is not None:
            out = out + eta * self._residual(V)
        return out

    def _standardized(self, V: np.ndarray) -> np.ndarray:
        assert self._mu is not None and self._scale is not None
        return (V - self._mu) / self._scale

    def _kernel(self, A: np.ndarray, B: np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Laplacian kernel matrix and M-distances between rows of A (n, D) and B (m, D)."""
        s = np.sqrt(M)
        a, b = A * s, B * s
        sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
        dist = np.sqrt(np.maximum(sq, 0.0))
        return np.exp(-float(self.gamma) * dist), dist

    def _residual(self, V: np.ndarray) -> np.ndarray:
        assert self._Z is not None and self._alpha is not None and self._M is not None
        K, _ = self._kernel(self._standardized(V), self._Z, self._M)
        return K @ self._alpha

    def score_one(self, x: Mapping[str, float]) -> float:
        """Worth of one (query, memory) pair.

        Parameters
        ----------
        x : dict of str to float
            As produced by :func:`features`; before the first ``learn_one`` only the base
            features are read.

        Returns
        -------
        float
            ``w_t · φ + η_t · r_t(z)``, in the units of ``y``.

        Raises
        ------
        InvalidInput
            If a feature is missing, unknown (after the first ``learn_one``), or not finite.
        """
        return float(self.score_many([x])[0])

    def score_many(self, xs: Iterable[Mapping[str, float]]) -> np.ndarray:
        """Worth of a batch; returns an ndarray of shape (n,), float64."""
        xs = list(xs)
        if self._keys is None:
            return self._predict(self._matrix(xs, self._base_keys, exact=False))
        return self._predict(self._matrix(xs, self._keys, exact=True))

    def score_array(self, V: Any, columns: Sequence[str]) -> np.ndarray:
        """Worth of the rows of ``V`` whose columns are named ``columns``, without dicts.

        The fast path for :func:`features_array`: the same scores as ``score_many`` on
        ``[dict(zip(columns, row)) for row in V]``.

        Parameters
        ----------
        V : array-like of shape (n, len(columns))
        columns : sequence of str
            Feature names of the columns, e.g. ``BASE_FEATURES + pair_feature_names(b)``.

        Returns
        -------
        ndarray of shape (n,), float64

        Raises
        ------
        InvalidInput
            Wrong shape, NaN or infinity, repeated names, or columns that lack a feature of the
            learned layout or (after the first ``learn_one``) name one it does not have.
        """
        A = _as_matrix(V, "V", 2)
        cols = list(columns)
        pos = {c: i for i, c in enumerate(cols)}
        if A.shape[1] != len(cols) or len(pos) != len(cols):
            raise InvalidInput(
                f"V has {A.shape[1]} columns for {len(cols)} names ({len(pos)} distinct)"
            )
        keys = self._keys if self._keys is not None else self._base_keys
        missing = [k for k in keys if k not in pos]
        if missing:
            raise InvalidInput(f"columns lack feature(s) {missing}; expected {list(keys)}")
        if self._keys is not None and len(cols) != len(keys):
            extra = sorted(set(cols) - set(keys))
            raise InvalidInput(
                f"unknown feature(s) {extra}; this learner was fitted on {list(keys)}"
            )
        return self._predict(A[:, [pos[k] for k in keys]])

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: Mapping[str, float], y: float) -> None:
        """Learn from the observed outcome ``y`` of the memory described by ``x``.

        Appends to the feedback FIFOs and runs whichever refits are scheduled at this example
        (base every ``base_every``, KRR every ``krr_every``, AGOP every ``agop_every``).

        Raises
        ------
        InvalidInput
            If ``y`` is not a finite real number, or ``x`` is malformed (see ``score_one``).
        """
        yv = _check_y(y)
        keys = self._layout_for(x)
        v = self._matrix([x], keys, exact=True)[0]
        self._keys = keys
        self._X.append(v)
        self._y.append(yv)
        self._n += 1
        n = self._n
        if n % self.base_every == 0:
            self._fit_base()
        if not self.residual:
            return
        agop_due = self.agop and n % self.agop_every == 0
        if n % self.krr_every == 0 or agop_due:
            fitted = self._fit_krr()
            if agop_due and fitted and self._update_metric():
                self._fit_krr()

    def learn_many(self, xs: Iterable[Mapping[str, float]], ys: Iterable[float]) -> None:
        """``learn_one`` on each pair in order (same schedule as one at a time)."""
        xs, ys = list(xs), list(ys)
        if len(xs) != len(ys):
            raise InvalidInput(f"got {len(xs)} inputs for {len(ys)} targets")
        for x, y in zip(xs, ys, strict=True):
            self.learn_one(x, y)

    def _window(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        n = min(size, len(self._X))
        X = np.stack(list(self._X)[-n:]) if n else np.zeros((0, len(self._keys or ())))
        return X, np.array(list(self._y)[-n:], dtype=np.float64)

    def _fit_base(self) -> None:
        X, y = self._window(self.base_window)
        if len(y) < self.min_fit:
            return
        P = X[:, : len(self._base_keys)]
        w0 = np.asarray(self.w0, dtype=np.float64)
        c = 1.0 / len(y) if self.base_loss == "mean" else 1.0
        A = c * (P.T @ P) + float(self.lambda_w) * np.eye(len(w0))
        b = c * (P.T @ y) + float(self.lambda_w) * w0
        w_fit = np.linalg.lstsq(A, b, rcond=None)[0]
        self._w = (1.0 - self.beta_w) * self._w + self.beta_w * w_fit

    def _fit_krr(self) -> bool:
        X, y = self._window(self.krr_window)
        if len(y) < self.min_fit:
            return False
        D = X.shape[1]
        if self.standardize:
            mu = X.mean(0)
            sd = X.std(0)
            sd = np.where(sd > 1e-12, sd, 1.0)
            self._mu, self._scale = mu, sd * math.sqrt(D)
        else:
            self._mu, self._scale = np.zeros(D), np.ones(D)
        if self._M is None or len(self._M) != D:
            self._M = np.ones(D)
        Z = self._standardized(X)
        r = y - X[:, : len(self._base_keys)] @ self._w  # residuals of the current base scorer
        K, _ = self._kernel(Z, Z, self._M)
        self._alpha = np.linalg.solve(K + float(self.lambda_krr) * np.eye(len(y)), r)
        self._Z = Z
        self._u += 1
        return True

    def _update_metric(self) -> bool:
        """AGOP step on the diagonal metric; returns False if the gradient vanished."""
        assert self._Z is not None and self._alpha is not None and self._M is not None
        X, _ = self._window(self.agop_window)
        if len(X) < self.min_fit:
            return False
        P = self._standardized(X)  # (J, D) points where gradients are taken
        K, dist = self._kernel(P, self._Z, self._M)  # (J, N)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(dist > 1e-10, 1.0 / dist, 0.0)  # drop the undefined self-term
        W = -float(self.gamma) * K * inv * self._alpha[None, :]  # (J, N)
        # ∇f(p_j) = M ⊙ Σ_i W_ji (p_j − z_i)
        grads = self._M[None, :] * (P * W.sum(1, keepdims=True) - W @ self._Z)
        G = (grads**2).mean(0)
        gm = G.mean()
        if not (gm > 0 and math.isfinite(gm)):
            return False
        lo, hi = self.metric_bounds
        M = (1.0 - self.beta_m) * self._M + self.beta_m * (G / gm)
        M = np.clip(M, lo, hi)
        self._M = M / M.mean()
        return True

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, Any]:
        """Learned state as JSON-able values (hyperparameters are not included).

        Arrays are stored bit-exact as ``{"shape": [...], "f8": base64 of little-endian
        float64}``, several times smaller and faster to encode than lists of floats. Restore
        with :meth:`load_state` on a learner with the same hyperparameters (e.g.
        ``learner.clone()``); scores and later updates are then identical.
        """
        X = np.stack(list(self._X)) if self._X else None
        return {
            "w": self._w.tolist(),
            "keys": None if self._keys is None else list(self._keys),
            "X": _pack(X),
            "y": list(self._y),
            "n": self._n,
            "u": self._u,
            "M": _pack(self._M),
            "Z": _pack(self._Z),
            "alpha": _pack(self._alpha),
            "mu": _pack(self._mu),
            "scale": _pack(self._scale),
        }

    def load_state(self, st: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` returned.

        Raises
        ------
        InvalidInput
            If the saved base weights do not match ``base_features``.
        """
        w = np.asarray(st["w"], dtype=np.float64)
        if w.shape != (len(self._base_keys),):
            raise InvalidInput(
                f"saved base weights have shape {w.shape}, this learner has "
                f"{len(self._base_keys)} base features"
            )
        self._w = w
        self._keys = None if st["keys"] is None else tuple(st["keys"])
        X = _unpack(st["X"])
        self._X.clear()
        self._y.clear()
        if X is not None:
            self._X.extend(row.copy() for row in X)
        self._y.extend(float(v) for v in st["y"])
        self._n, self._u = int(st["n"]), int(st["u"])
        self._M, self._Z, self._alpha = _unpack(st["M"]), _unpack(st["Z"]), _unpack(st["alpha"])
        self._mu, self._scale = _unpack(st["mu"]), _unpack(st["scale"])


def _pack(a: np.ndarray | None) -> dict[str, Any] | None:
    """A float array as JSON-able ``{"shape", "f8"}`` (base64, little-endian float64)."""
    if a is None:
        return None
    b = np.ascontiguousarray(a, dtype="<f8")
    return {"shape": list(b.shape), "f8": base64.b64encode(b.tobytes()).decode("ascii")}


def _unpack(d: Mapping[str, Any] | None) -> np.ndarray | None:
    if d is None:
        return None
    raw = np.frombuffer(base64.b64decode(d["f8"]), dtype="<f8")
    return raw.astype(np.float64).reshape(d["shape"])
