"""CURATOR's net-value density ρ(m) = (V̂ − λĤ)/b and the running statistics it reads.

References
----------
CURATOR ("Forget to Improve: On-Device LLM-Agent Continual Learning via Budget-Curated Memory"),
Section III-B, Eq. 1-4; Eq. 6 (energy virtual queue); Eq. 7-8 (share score).
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any, NamedTuple

import numpy as np

from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.retrieve.dense import row_blocks
from memcurator.types import Entry
from memcurator.value.columns import entry_columns
from memcurator.value.helpfulness import MarginalUtility
from memcurator.value.provenance import (
    DEFAULT_PROVENANCE_WEIGHTS,
    provenance_risk,
)


class ScoreTerms(NamedTuple):
    """Every term of ρ for n entries; each field is an ndarray of shape (n,).

    ``rho`` is in (value units) per byte; ``V``, ``H`` are dimensionless; ``b`` in bytes.
    """

    rho: np.ndarray
    V: np.ndarray
    H: np.ndarray
    p: np.ndarray
    q: np.ndarray
    a: np.ndarray
    eta: np.ndarray
    pi: np.ndarray
    b: np.ndarray


def softmax_propensity(E: np.ndarray, sketch: np.ndarray, kappa: float, mode: str) -> np.ndarray:
    """Retrieval propensity of each row of ``E`` against the query sketch (CURATOR, Eq. 3).

    Parameters
    ----------
    E : ndarray of shape (n, d)
    sketch : ndarray of shape (d,)
    kappa : float
        Temperature κ > 0.
    mode : {"relative", "softmax", "scaled"}
        ``"softmax"`` is Eq. 3 literally (sums to one, so V̂ shrinks as 1/|M|); ``"relative"``
        (default in :class:`CuratorScorer`) divides by the largest propensity so V̂ stays on the
        scale of Ĥ whatever |M| is; ``"scaled"`` multiplies by |M| (mean one).

    Returns
    -------
    ndarray of shape (n,)

    Examples
    --------
    >>> E = np.eye(2)
    >>> softmax_propensity(E, np.array([1.0, 0.0]), 1.0, "relative").round(3).tolist()
    [1.0, 0.368]
    """
    if E.shape[0] == 0:
        return np.zeros(0)
    return propensity_from_logits((E @ sketch) / kappa, mode)


def propensity_from_logits(z: np.ndarray, mode: str) -> np.ndarray:
    """Eq. 3 from the logits z_i = e_i·q̄ / κ, shape (n,); ``mode`` as in
    :func:`softmax_propensity`.

    Examples
    --------
    >>> propensity_from_logits(np.array([1.0, 0.0]), "relative").round(3).tolist()
    [1.0, 0.368]
    """
    n = z.shape[0]
    if n == 0:
        return np.zeros(0)
    z = z - z.max()
    ez = np.exp(z)
    if mode == "relative":
        return ez  # max is exp(0) = 1
    p = ez / ez.sum()
    if mode == "softmax":
        return p
    if mode == "scaled":
        return p * n
    raise InvalidInput(
        f"unknown propensity mode {mode!r}; known: ['relative', 'scaled', 'softmax']"
    )


@dataclass(eq=False, repr=False, kw_only=True)
class RhoParams:
    """The parameters of ρ that :class:`CuratorScorer` and the policies' ρ estimator
    (:class:`~memcurator.policy.estimators.RhoEstimator`) share; keyword-only, defaults here.

    Parameters
    ----------
    lam : float, default 1.0
        λ, the value/harm trade-off (Eq. 1).
    kappa : float, default 0.1
        Retrieval temperature κ of the propensity softmax (Eq. 3). Cosines of the hashing
        embedder span roughly [0, 1]; κ = 0.1 makes a 0.3 cosine gap a factor e³ ≈ 20.
    phi : float, default 0.9
        Sketch smoothing φ in q̄ ← φ q̄ + (1 − φ) q (Eq. 3); about the last ten queries.
    propensity : {"relative", "softmax", "scaled"}, default "relative"
        See :func:`softmax_propensity`.
    provenance_weights : sequence of 5 float
        The fixed prior w of π = σ(wᵀψ) (Eq. 4); see ``DEFAULT_PROVENANCE_WEIGHTS``.
    use_propensity, use_helpfulness, use_abstraction, use_negative_transfer, use_provenance : bool
        Ablation switches; a switched-off factor of V̂ is 1, a switched-off harm term is 0.
    per_byte : bool, default True
        Divide by b(m) (Eq. 1); False ranks by net value alone (ablation ``curator/no-per-byte``).
    eta_offset : float, default 0.0
        Harm counts only the distance beyond this RMS z-score: η = s·max(0, z − offset). With
        0 (the default, as before) an entry typical of the working set (z ≈ 1) pays η ≈ s, which
        on the SQL stream (η ≈ 0.3 against V̂ ≈ 0.05) makes every entry's net value negative, so
        Keep orders by closeness to the centroid alone and drops a migrated family's new
        exemplars first (issue 11, cause 5). 1.0 charges only atypical entries.
    """

    lam: float = 1.0
    kappa: float = 0.1
    phi: float = 0.9
    propensity: str = "relative"
    provenance_weights: tuple[float, ...] = DEFAULT_PROVENANCE_WEIGHTS
    use_propensity: bool = True
    use_helpfulness: bool = True
    use_abstraction: bool = True
    use_negative_transfer: bool = True
    use_provenance: bool = True
    per_byte: bool = True
    eta_offset: float = 0.0

    def rho_params(self) -> dict[str, Any]:
        """These parameters by name, as a :class:`CuratorScorer` takes them."""
        return {f.name: getattr(self, f.name) for f in fields(RhoParams)}


@dataclass(eq=False, repr=False)
class CuratorScorer(RhoParams):
    """Computes ρ(m) for a set of entries and keeps the running statistics it needs.

    Parameters
    ----------
    dim : int
        Embedding dimension d (the only positional parameter).
    centroid_phi : float, default 0.98
        Smoothing of the working-task centroid μ and diagonal variance (Eq. 4); slower than the
        sketch, about the last fifty tasks.
    shrinkage : float, default 0.5
        Σ = (1 − s)·diag(var) + s·mean(var)·I: a diagonal covariance shrunk toward a scaled
        identity (Ledoit-Wolf style target), since a full d×d covariance from a short stream is
        singular. Our reading: the paper says "covariance Σ" without an estimator.
    helpfulness : MarginalUtility, optional
        The streaming helpfulness head (a fresh one by default).
    lam, kappa, phi, propensity, provenance_weights, use_propensity, use_helpfulness, \
use_abstraction, use_negative_transfer, use_provenance, per_byte, eta_offset :
        See :class:`RhoParams`.

    Raises
    ------
    InvalidInput
        A non-finite λ, κ, φ or centroid φ; κ ≤ 0; φ or centroid φ outside [0, 1); shrinkage
        outside [0, 1]; a negative or non-finite ``eta_offset``; not 5 provenance weights.

    Notes
    -----
    Negative-transfer risk is η(m) = s(m)·‖e_m − μ‖_{Σ⁻¹}/√d; dividing by √d makes it a root-mean-
    square z-score, about one for an entry typical of the working set, so it is on the scale of
    π and V̂ (the paper gives no normalization).

    Examples
    --------
    >>> sc = CuratorScorer(dim=2)
    >>> sc.observe_query(np.array([1.0, 0.0], dtype=np.float32))
    >>> E = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    >>> t = sc.score_arrays(E, b=np.array([100.0, 100.0]), a=np.ones(2), q=np.full(2, 0.5),
    ...                     s=np.zeros(2), psi=np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], float))
    >>> bool(t.rho[0] > 0 > t.rho[1])
    True
    """

    dim: int
    _: KW_ONLY
    centroid_phi: float = 0.98
    shrinkage: float = 0.5
    helpfulness: MarginalUtility = None  # type: ignore[assignment]  # None: a fresh one

    def __post_init__(self) -> None:
        if self.helpfulness is None:
            self.helpfulness = MarginalUtility()
        for name in ("lam", "kappa", "phi", "centroid_phi"):
            v = getattr(self, name)
            if not math.isfinite(v):
                raise InvalidInput(f"{name} must be finite, got {v!r}")
        if not math.isfinite(self.eta_offset) or self.eta_offset < 0:
            raise InvalidInput(f"eta_offset must be a finite number >= 0, got {self.eta_offset!r}")
        if (
            self.kappa <= 0
            or not 0 <= self.phi < 1
            or not 0 <= self.centroid_phi < 1
            or not 0 <= self.shrinkage <= 1
        ):
            raise InvalidInput(
                "need kappa > 0, phi and centroid_phi in [0, 1), shrinkage in [0, 1]"
            )
        if len(self.provenance_weights) != 5:
            raise InvalidInput("provenance_weights must have 5 values (see provenance_features)")
        self._w = np.asarray(self.provenance_weights, dtype=np.float64)
        self._sketch = np.zeros(self.dim)
        self._mu = np.zeros(self.dim)
        self._var = np.full(self.dim, 1.0 / self.dim)
        self._n_queries = 0

    # ------------------------------------------------------------------ profile phase
    def observe_query(self, e_q: np.ndarray) -> None:
        """Fold one query embedding into the sketch q̄ and the working-task centroid μ, Σ.

        O(d) time, no history kept (CURATOR, Sec. III-A). Raises :class:`DimensionMismatch`.
        """
        e = np.asarray(e_q, dtype=np.float64)
        if e.shape != (self.dim,):
            raise DimensionMismatch(f"query embedding has shape {e.shape}, expected ({self.dim},)")
        if not np.all(np.isfinite(e)):
            raise InvalidInput("query embedding contains NaN or infinite values")
        if self._n_queries == 0:
            self._sketch = e.copy()
            self._mu = e.copy()
        else:
            self._sketch = self.phi * self._sketch + (1 - self.phi) * e
            diff = e - self._mu
            self._mu = self._mu + (1 - self.centroid_phi) * diff
            self._var = self.centroid_phi * (self._var + (1 - self.centroid_phi) * diff * diff)
        self._n_queries += 1
        seen = getattr(self.helpfulness, "observe_query", None)
        if seen is not None:  # a head with a local baseline remembers the task's query
            seen(e)

    @property
    def sketch(self) -> np.ndarray:
        """The running query sketch q̄, shape (d,): what a peer advertises for Share (Eq. 8)."""
        return self._sketch.copy()

    # ------------------------------------------------------------------ score phase
    def entry_arrays(
        self, entries: list[Entry], E: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Per-entry inputs of ρ: b, a, q, s, ψ as arrays over ``entries``.

        ``E`` (the entries' embeddings, shape (n, d)) is read by a helpfulness head with a local
        baseline (:class:`~memcurator.value.helpfulness_local.LocalBaselineUtility`); other
        heads ignore it.
        """
        # Column-wise (one pass per field, no per-entry ndarray): the same values as
        # m.abstraction_gain, helpfulness.q(m.stats), text_stats(m) and provenance_features().
        # A resident list carries columns kept up to date by its resident set
        # (memcurator.value.columns): only entries that changed are recomputed.
        n = len(entries)
        cols = entry_columns(entries)
        b = cols.column("bytes")
        raw = cols.column("raw_bytes")
        a = np.divide(raw, b, out=np.ones(n), where=b > 0)
        # the heads here read counts through value.columns.stat_column; any other gets dicts
        own = isinstance(self.helpfulness, MarginalUtility)
        if E is not None and getattr(self.helpfulness, "local", False):
            q = self.helpfulness.q_local(cols, E, [m.id for m in entries])  # type: ignore[attr-defined]
        else:
            q = self.helpfulness.q_many(cols if own else [m.stats for m in entries])
        psi = np.empty((n, 5))
        psi[:, 0] = 1.0
        psi[:, 1] = cols.column("external")
        psi[:, 2] = cols.column("peer")
        psi[:, 3] = cols.column("log_reinforcement")
        psi[:, 4] = cols.column("instruction_likeness")
        return {"b": b, "a": a, "q": q, "s": cols.column("specificity"), "psi": psi}

    def score(
        self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray | None = None
    ) -> ScoreTerms:
        """ρ and its terms for ``entries`` whose embeddings are the rows of ``E`` (n, d).

        ``sketch`` replaces q̄ (a peer's advertised sketch gives the share score of Eq. 8).
        """
        arr = self.entry_arrays(entries, E)
        return self.score_arrays(E, sketch=sketch, **arr)

    def sketch_like(self, E: np.ndarray) -> np.ndarray:
        """q̄ in the precision of the matrix ``E`` (float64 for a non-float matrix): the vector
        whose products with the residents' rows :meth:`score_candidate` reads as ``res_dots``.
        """
        dt = E.dtype if E.dtype.kind == "f" else np.dtype(np.float64)
        return self._sketch.astype(dt)

    def score_candidate(
        self,
        m: Entry,
        E_res: np.ndarray,
        sketch: np.ndarray | None = None,
        res_dots: np.ndarray | None = None,
    ) -> ScoreTerms:
        """ρ's terms of one candidate ``m`` scored next to the residents (rows of ``E_res``).

        The same terms as the last row of ``score(residents + [m], vstack(E_res, e_m))``, at
        the cost of one (n, d) matrix-vector product: the candidate's terms depend on the
        residents only through the propensity's normaliser (the largest, or the sum of, the
        residents' logits, Eq. 3), so their per-entry inputs (q, text statistics, provenance:
        Python work per entry) are never computed. The residents' logits are taken in the
        matrix's own precision (float32 for a memory's resident matrix), so p(m) may differ
        from the full score's in the 7th significant digit. Admission runs this on every write
        (issue 9, section 5).

        Parameters
        ----------
        m : Entry
            The candidate, its ``embedding`` of shape (d,).
        E_res : ndarray of shape (n, d)
            The residents' embeddings.
        sketch : ndarray of shape (d,), optional
        res_dots : ndarray of shape (n,), optional
            ``E_res @ self.sketch_like(E_res)``, when the caller has it already (the trust
            gate takes it in the same pass over the matrix as its neighbour search,
            :func:`~memcurator.retrieve.dense.row_dots`); only with the own sketch.

        Returns
        -------
        ScoreTerms
            Each field of shape (1,).
        """
        E_res = np.asarray(E_res).reshape(-1, self.dim)
        e = np.asarray(m.embedding, dtype=np.float64).reshape(1, -1)
        p = None
        if self.use_propensity:
            sk = self._sketch if sketch is None else np.asarray(sketch, dtype=np.float64)
            if res_dots is None or sketch is not None:
                dt = E_res.dtype if E_res.dtype.kind == "f" else np.dtype(np.float64)
                res_dots = E_res @ sk.astype(dt)
            z_m = (e @ sk) / self.kappa
            if self.propensity == "relative" and res_dots.shape[0]:
                # Eq. 3's relative form needs only the largest logit: exp(z_m - max z), the
                # same arithmetic as propensity_from_logits on the concatenation
                z_max = max(float(res_dots.max().astype(np.float64) / self.kappa), float(z_m[0]))
                p = np.exp(z_m - z_max)
            else:
                z_res = res_dots.astype(np.float64) / self.kappa
                z = np.concatenate([z_res, z_m])
                p = propensity_from_logits(z, self.propensity)[-1:]
        return self.score_arrays(e, sketch=sketch, p=p, **self.entry_arrays([m], e))

    def score_arrays(
        self,
        E: np.ndarray,
        *,
        b: np.ndarray,
        a: np.ndarray,
        q: np.ndarray,
        s: np.ndarray,
        psi: np.ndarray,
        sketch: np.ndarray | None = None,
        p: np.ndarray | None = None,
    ) -> ScoreTerms:
        """Vectorized Eq. 1-4 over n entries.

        Parameters
        ----------
        E : ndarray of shape (n, d)
        b : ndarray of shape (n,), bytes (> 0)
        a : ndarray of shape (n,), abstraction gain b⁰/b
        q : ndarray of shape (n,), helpfulness
        s : ndarray of shape (n,), specificity in [0, 1]
        psi : ndarray of shape (n, 5), provenance features
        sketch : ndarray of shape (d,), optional; defaults to q̄
        p : ndarray of shape (n,), optional
            The propensities, when already computed against a larger set
            (:meth:`score_candidate`); by default Eq. 3 over the rows of ``E``.

        Raises
        ------
        InvalidInput
            If any input holds NaN or infinite values (they are never ranked), or a b <= 0.
        """
        E = np.asarray(E)
        if E.dtype.kind != "f":
            E = E.astype(np.float64)
        n = E.shape[0]
        for name, v in (
            ("b", b),
            ("a", a),
            ("q", q),
            ("s", s),
            ("psi", psi),
            ("sketch", np.zeros(0) if sketch is None else sketch),
        ):
            if not np.all(np.isfinite(v)):
                raise InvalidInput(f"score input {name!r} contains NaN or infinite values")
        if np.any(np.asarray(b) <= 0):
            raise InvalidInput("score input 'b' must be > 0 bytes (rho divides by it)")
        if n and E.shape[1] != self.dim:
            raise DimensionMismatch(f"embeddings have dim {E.shape[1]}, scorer expects {self.dim}")
        sk = self._sketch if sketch is None else np.asarray(sketch, dtype=np.float64)
        want_z = self.use_propensity and p is None
        want_d2 = self.use_negative_transfer and n > 0
        iv = mu_iv = None
        if want_d2:
            var = (1 - self.shrinkage) * self._var + self.shrinkage * self._var.mean()
            iv = 1.0 / np.maximum(var, 1e-12)
            mu_iv = self._mu * iv
        logits, ee, e_mu = _matrix_terms(E, sk if want_z else None, iv, mu_iv)
        if not self.use_propensity:
            p = np.ones(n)
        elif p is None:
            assert logits is not None
            p = propensity_from_logits(logits / self.kappa, self.propensity) if n else np.zeros(0)
        qq = q if self.use_helpfulness else np.ones(n)
        aa = a if self.use_abstraction else np.ones(n)
        V = p * qq * aa
        if want_d2:
            assert mu_iv is not None and ee is not None and e_mu is not None
            # Σ_j (e_j − μ_j)² / var_j expanded, so no (n, d) temporaries besides E itself
            d2 = ee - 2.0 * e_mu
            d2 = np.maximum(d2 + float(self._mu @ mu_iv), 0.0)
            z = np.sqrt(d2 / self.dim)
            eta = s * (np.maximum(z - self.eta_offset, 0.0) if self.eta_offset else z)
        else:
            eta = np.zeros(n)
        pi = provenance_risk(psi, self._w) if self.use_provenance else np.zeros(n)
        pi = np.asarray(pi, dtype=np.float64).reshape(n)
        H = eta + pi
        net = V - self.lam * H
        rho = net / b if self.per_byte else net.copy()
        return ScoreTerms(rho, V, H, p, qq, aa, eta, pi, np.asarray(b, dtype=np.float64))

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, Any]:
        """Learned state as plain JSON-able values (for crash-safe persistence)."""
        return {
            "sketch": self._sketch.tolist(),
            "mu": self._mu.tolist(),
            "var": self._var.tolist(),
            "n_queries": self._n_queries,
            "helpfulness": self.helpfulness.state(),
        }

    def load_state(self, st: dict[str, Any]) -> None:
        if len(st["sketch"]) != self.dim:
            raise DimensionMismatch(
                f"saved scorer state has dim {len(st['sketch'])}, not {self.dim}"
            )
        self._sketch = np.asarray(st["sketch"], dtype=np.float64)
        self._mu = np.asarray(st["mu"], dtype=np.float64)
        self._var = np.asarray(st["var"], dtype=np.float64)
        self._n_queries = int(st["n_queries"])
        self.helpfulness.load_state(st["helpfulness"])


def _matrix_terms(
    E: np.ndarray, sk: np.ndarray | None, iv: np.ndarray | None, mu_iv: np.ndarray | None
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """The terms of Eq. 3-4 that read every resident's embedding, in one pass over ``E``.

    Returns ``(E @ sk, Σ_j E_ij² iv_j, E @ mu_iv)`` in float64 (None where the input vector is
    None), taken block by block: each block of rows is converted to float64 once and read by
    every product while it is in cache, so a float32 (n, d) matrix is never copied whole to
    float64 (at 100k rows that copy was 410 MB and most of a Keep pass). Per row, the values
    are those of the same products over the whole float64 matrix (tests/test_row_dots.py).

    Raises
    ------
    InvalidInput
        If ``E`` holds NaN or infinite values.
    """
    n = E.shape[0]
    z = np.empty(n) if sk is not None else None
    ee = np.empty(n) if iv is not None else None
    e_mu = np.empty(n) if mu_iv is not None else None
    for lo, hi in row_blocks(n):
        Eb = np.asarray(E[lo:hi], dtype=np.float64)
        if not np.all(np.isfinite(Eb)):
            raise InvalidInput("score input 'E' contains NaN or infinite values")
        if z is not None and sk is not None:
            np.matmul(Eb, sk, out=z[lo:hi])
        if ee is not None and iv is not None:
            ee[lo:hi] = np.einsum("ij,ij,j->i", Eb, Eb, iv)
        if e_mu is not None and mu_iv is not None:
            np.matmul(Eb, mu_iv, out=e_mu[lo:hi])
    return z, ee, e_mu


class EnergyQueue:
    """Virtual energy queue Q(t+1) = [Q(t) + ε(t) − ε̄]₊ (CURATOR, Eq. 6).

    Parameters
    ----------
    budget : float
        ε̄, the time-averaged energy allowed per step, in energy-proxy units (see Notes).
    nu : float, default 1e6
        ν, the weight of value against backlog in the drift-plus-penalty admission
        ``ρ(m) − Q·ε(m)/ν``.

    Notes
    -----
    The energy proxy ε counts bytes of work, which is what dominates a CPU-bound memory layer:
    per step, the bytes passed through the embedder (query and written texts) plus the resident
    bytes scanned by recall and governance (embedding rows read). ε(m) of admitting an entry is
    its text bytes (embedded once) plus its stored bytes (scanned at each later pass).

    Examples
    --------
    >>> q = EnergyQueue(budget=100.0, nu=10.0)
    >>> q.update(250.0); q.update(0.0)
    >>> q.Q
    50.0
    >>> q.penalty(20.0)
    100.0
    """

    def __init__(self, budget: float, nu: float = 1e6):
        self.budget = budget
        self.nu = nu
        if not (math.isfinite(budget) and budget >= 0 and math.isfinite(nu) and nu > 0):
            raise InvalidInput("energy budget must be finite and >= 0, nu finite and > 0")
        self.Q = 0.0

    def update(self, eps_t: float) -> None:
        """Fold step ``t``'s energy ε(t) into the queue."""
        if not math.isfinite(eps_t) or eps_t < 0:
            raise InvalidInput(f"energy must be finite and >= 0, got {eps_t!r}")
        self.Q = max(0.0, self.Q + eps_t - self.budget)

    def penalty(self, eps_m: float) -> float:
        """Q·ε(m)/ν: subtracted from ρ(m) at admission."""
        return self.Q * eps_m / self.nu
