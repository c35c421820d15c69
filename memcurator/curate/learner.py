"""CPU learners for read-time curation: a softmax policy over discrete choices, conditioned on task
features, trained online with group-relative advantages.

This is the nearest thing to the papers' GRPO that runs on a 2-core CPU, and it is named as
such: **not** a language-model policy. JitMem trains an 8B curator with GRPO (Sec. 3, group size
8); here the curator's *choice* among curation operators or prompts is learned: for a task,
G candidate payloads are each scored by the same-task reward, advantages are
``A_i = r_i - mean_j r_j`` (JitMem's GRPO without std normalisation, after Liu et al. 2025),
and a linear-softmax policy over task features takes one REINFORCE step. MemPilot's
objective-wise decoupling (Eq. 9-10) and prefix-based marginal credit (Eq. 12-13) are
:func:`gdpo_advantages` and :func:`marginal_credit`.

A GPU trainer plugs in through :class:`CuratorTrainer`: every scored group is handed to it as a
:class:`GroupSample` (task, candidate payloads, rewards, advantages), exactly the rows a GRPO
trainer for an LLM curator consumes; :class:`JsonlTrainer` writes them to a file for one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memcurator.errors import InvalidInput


def group_advantages(rewards: Sequence[float]) -> np.ndarray:
    """JitMem's GRPO advantages ``A_i = r_i - mean_j r_j`` (no std normalisation), shape (G,).

    Examples
    --------
    >>> group_advantages([1.0, 0.0, 0.0, 1.0]).tolist()
    [0.5, -0.5, -0.5, 0.5]
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.size == 0:
        return r
    return r - r.mean()


def gdpo_advantages(
    quality: Sequence[float],
    cost: Sequence[float],
    latency: Sequence[float],
    lam: Sequence[float],
    eps: float = 1e-6,
) -> np.ndarray:
    """MemPilot's objective-wise advantage decoupling, shape (G,).

    Rewards are ``r^Q = Q``, ``r^C = -C``, ``r^L = -L`` (Eq. 7); each is normalised within the
    group, ``A^j = (r^j - mu_j) / (sigma_j + eps)`` (Eq. 9); the weighted sum
    ``lam_Q A^Q + lam_C A^C + lam_L A^L`` is normalised again over the batch (Eq. 10; the batch
    here is the group).

    Parameters
    ----------
    quality, cost, latency : sequence of float, length G
        Q in [0, 1], C in USD, L in seconds.
    lam : sequence of 3 floats
        ``(lam_Q, lam_C, lam_L)``; MemPilot fixes ``lam_Q = 1``.

    Raises
    ------
    InvalidInput
        Lengths differ or ``lam`` does not have 3 finite entries.

    Examples
    --------
    >>> a = gdpo_advantages([1, 1, 0], [0.0, 0.01, 0.0], [1.0, 2.0, 1.0], (1.0, 1.0, 0.0))
    >>> int(np.argmax(a)), int(np.argmin(a))
    (0, 2)
    """
    q, c, lt = (np.asarray(v, dtype=np.float64) for v in (quality, cost, latency))
    if not (q.shape == c.shape == lt.shape) or q.ndim != 1:
        raise InvalidInput("quality, cost and latency must have the same length G")
    lam_a = np.asarray(lam, dtype=np.float64)
    if lam_a.shape != (3,) or not np.all(np.isfinite(lam_a)):
        raise InvalidInput(f"lam must be 3 finite weights (Q, C, L), got {lam!r}")

    def norm(r: np.ndarray) -> np.ndarray:
        return (r - r.mean()) / (r.std() + eps)

    bar = lam_a[0] * norm(q) + lam_a[1] * norm(-c) + lam_a[2] * norm(-lt)
    return norm(bar) if bar.size > 1 else bar * 0.0


def marginal_credit(utilities: Sequence[float]) -> np.ndarray:
    """Prefix-based marginal utility ``Δu_t = u_t - u_{t-1}`` for t = 1..K (MemPilot Eq. 12, 21).

    ``utilities`` holds ``u_0`` (no evidence) to ``u_K``; returns shape (K,).

    Examples
    --------
    >>> marginal_credit([0.0, 1.0, 1.0]).tolist()
    [1.0, 0.0]
    """
    u = np.asarray(utilities, dtype=np.float64)
    return np.diff(u) if u.size > 1 else np.zeros(0)


class SoftmaxChooser:
    """A factorised linear-softmax policy over discrete choices, conditioned on task features.

    ``pi(a | x) = prod_f softmax(W_f phi(x))[a_f]`` with one weight matrix per factor
    (MemPilot's factorised controls, Sec. 3.2; one factor for JitMem's operator choice).
    Trained by REINFORCE: ``W_f += lr * A * (onehot(a_f) - pi_f) phi(x)^T``.

    Parameters
    ----------
    factors : dict of str to list of str
        Factor name → its options.
    features : list of str
        Names of the task features, in order (missing ones read as 0; a bias is added).
    lr : float, default 0.5
        Step size.
    seed : int, default 0
        Seeds the sampling of choices.

    Raises
    ------
    InvalidInput
        A factor without options or a non-positive learning rate.

    Examples
    --------
    >>> pol = SoftmaxChooser({"op": ["a", "b"]}, ["f"], lr=1.0)
    >>> pol.probs("op", {"f": 1.0}).tolist()
    [0.5, 0.5]
    >>> pol.learn_one({"f": 1.0}, {"op": "b"}, advantage=1.0)
    >>> pol.greedy({"f": 1.0})
    {'op': 'b'}
    """

    def __init__(
        self,
        factors: Mapping[str, Sequence[str]],
        features: Sequence[str],
        lr: float = 0.5,
        seed: int = 0,
    ):
        self.factors = {k: list(v) for k, v in factors.items()}
        self.features = list(features)
        self.lr = lr
        self.seed = seed
        for k, v in self.factors.items():
            if not v:
                raise InvalidInput(f"factor {k!r} has no options")
        if not (isinstance(lr, int | float) and math.isfinite(lr) and lr > 0):
            raise InvalidInput(f"lr must be a finite number > 0, got {lr!r}")
        d = len(self.features) + 1
        self._w = {k: np.zeros((len(v), d)) for k, v in self.factors.items()}
        self._rng = np.random.default_rng(seed)
        self.updates = 0

    def phi(self, x: Mapping[str, float]) -> np.ndarray:
        """Feature vector ``[1, x_1, ..., x_d]``, shape (d + 1,); ``x`` is not modified."""
        v = [1.0] + [float(x.get(n, 0.0)) for n in self.features]
        return np.nan_to_num(np.asarray(v, dtype=np.float64))

    def probs(self, factor: str, x: Mapping[str, float]) -> np.ndarray:
        """Choice probabilities of one factor, shape (n_options,)."""
        z = self._w[factor] @ self.phi(x)
        z = z - z.max()
        e = np.exp(z)
        return e / e.sum()

    def sample(self, x: Mapping[str, float], only: Sequence[str] | None = None) -> dict[str, str]:
        """One choice per factor (or per factor in ``only``), drawn from the policy."""
        out = {}
        for f in only if only is not None else self.factors:
            p = self.probs(f, x)
            out[f] = self.factors[f][int(self._rng.choice(len(p), p=p))]
        return out

    def greedy(self, x: Mapping[str, float], only: Sequence[str] | None = None) -> dict[str, str]:
        """The most probable option per factor (ties: the first listed)."""
        return {
            f: self.factors[f][int(np.argmax(self.probs(f, x)))]
            for f in (only if only is not None else self.factors)
        }

    def learn_one(
        self, x: Mapping[str, float], choice: Mapping[str, str], advantage: float
    ) -> None:
        """One REINFORCE step on the factors named in ``choice``; ``advantage`` 0 is a no-op."""
        a = float(advantage)
        if not math.isfinite(a) or a == 0.0:
            return
        ph = self.phi(x)
        for f, opt in choice.items():
            p = self.probs(f, x)
            g = -p
            g[self.factors[f].index(opt)] += 1.0
            self._w[f] += self.lr * a * np.outer(g, ph)
        self.updates += 1

    def state(self) -> dict[str, Any]:
        """Learned weights as plain data."""
        return {"w": {k: v.tolist() for k, v in self._w.items()}, "updates": self.updates}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state`; weights of another shape are ignored."""
        for k, v in dict(state.get("w") or {}).items():
            arr = np.asarray(v, dtype=np.float64)
            if k in self._w and arr.shape == self._w[k].shape:
                self._w[k] = arr
        self.updates = int(state.get("updates", self.updates))


@dataclass
class GroupSample:
    """One scored group for a curator trainer (the rows of a GRPO batch).

    Attributes
    ----------
    task : str
    features : dict of str to float
    candidates : list of dict
        ``{"operator": ..., "payload": ...}`` per candidate, length G.
    rewards : list of float
        Same-task reward of each candidate (the checker's, as in JitMem's training).
    advantages : list of float
    """

    task: str
    features: dict[str, float]
    candidates: list[dict[str, str]]
    rewards: list[float]
    advantages: list[float] = field(default_factory=list)


@runtime_checkable
class CuratorTrainer(Protocol):
    """Hook for a GPU trainer: receives every scored group (e.g. to run GRPO on an LLM curator,
    JitMem Sec. 3 "Curator Training": lr 1e-6, batch 32, G = 8, 100 steps)."""

    def submit(self, sample: GroupSample) -> None: ...


class JsonlTrainer:
    """Append each :class:`GroupSample` as one JSON line to ``path`` (input for an offline GPU
    GRPO job; nothing is trained here).

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.jsonl")
    >>> JsonlTrainer(p).submit(GroupSample("t", {}, [{"operator": "a", "payload": ""}], [1.0]))
    >>> open(p).read().count("\\n")
    1
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def submit(self, sample: GroupSample) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(sample), allow_nan=False) + "\n")


__all__ = [
    "CuratorTrainer",
    "GroupSample",
    "JsonlTrainer",
    "SoftmaxChooser",
    "gdpo_advantages",
    "group_advantages",
    "marginal_credit",
]
