"""No trust in a peer's claims: recomputed abstraction gain, reputation-shrunk helpfulness,
peer quarantine, and the feedback-quarantine rule for entries that keep failing.

CURATOR (Sec. IV, Eq. 8 and Trust, Alg. 1 l. 18-22) scores a received entry "with the
sender-advertised helpfulness and abstraction gain". An advertised ``q = 1, a = 50`` then buys any
entry its admission. Here neither number is taken on faith:

- ``a`` is recomputed from the bytes received (:func:`recompute_abstraction_gain`): without the raw
  trajectory whose distillation *is* the insight, there is no evidence of compaction and ``a = 1``;
- ``q`` is shrunk toward the receiver's local prior by the peer's reputation
  (:meth:`PeerReputation.shrink_q`), a Beta posterior over the outcomes of that peer's entries
  *used here*, so a new or failing peer's advertisement counts for (almost) nothing;
- a peer whose posterior falls under a threshold is quarantined (reversible, with its reason).

References
----------
CURATOR, Eq. 3 (a = b⁰/b), Eq. 8 (q, a transfer unchanged — replaced here), Sec. V-C (Fig. 7b:
poison that slips in is only demoted over rounds — here :func:`feedback_quarantine` evicts it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memcurator.distill import ExtractiveDistiller
from memcurator.errors import InvalidInput


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def recompute_abstraction_gain(text: str, raw_text: str | None = None) -> float:
    """Abstraction gain ``a = b⁰/b`` from the bytes actually received (CURATOR Eq. 3).

    ``b⁰`` counts only when the raw trajectory arrived too *and* distils (extractively) to
    exactly ``text``; otherwise nothing proves the compaction and ``a = 1``.

    Parameters
    ----------
    text : str
        The received entry.
    raw_text : str, optional
        The raw trajectory the sender says it came from.

    Returns
    -------
    float
        ``>= 1``.

    Raises
    ------
    InvalidInput
        Empty ``text``.

    Examples
    --------
    >>> ins = "Task: Count rows\\nAction: SELECT COUNT(*) FROM t;"
    >>> raw = "Task: Count rows\\nObservation: Table t(a INT)\\nAction: SELECT COUNT(*) FROM t;"
    >>> round(recompute_abstraction_gain(ins, raw + "\\nOutcome: success"), 3)
    1.938
    >>> recompute_abstraction_gain(ins), recompute_abstraction_gain(ins, "unrelated " * 50)
    (1.0, 1.0)
    """
    if not isinstance(text, str) or not text:
        raise InvalidInput("text must be a non-empty string")
    if not raw_text:
        return 1.0
    distilled = ExtractiveDistiller(max_chars=10**9).distill(raw_text)
    if distilled != text:
        return 1.0
    return max(1.0, _utf8(raw_text) / _utf8(text))


@dataclass(frozen=True)
class Posterior:
    """Beta(α, β) posterior over a success probability.

    Attributes
    ----------
    alpha, beta : float
    n : int
        Outcomes observed (beyond the prior).
    mean : float
    lcb : float
        Lower ``1 - conf`` quantile (one-sided lower confidence bound).
    """

    alpha: float
    beta: float
    n: int
    mean: float
    lcb: float


def beta_posterior(
    successes: float, failures: float, *, prior: tuple[float, float] = (1.0, 1.0), conf: float = 0.9
) -> Posterior:
    """Posterior Beta(α₀ + s, β₀ + f), its mean and its lower ``conf`` bound.

    Raises
    ------
    InvalidInput
        Negative counts, non-positive prior, or ``conf`` outside (0, 1).

    Examples
    --------
    >>> p = beta_posterior(8, 2)
    >>> round(p.mean, 3), round(p.lcb, 3)
    (0.75, 0.585)
    """
    a0, b0 = prior
    if successes < 0 or failures < 0 or not (a0 > 0 and b0 > 0):
        raise InvalidInput("counts must be >= 0 and the prior positive")
    if not 0.0 < conf < 1.0:
        raise InvalidInput(f"conf must be in (0, 1), got {conf}")
    from scipy.special import betaincinv  # ~1 s to import: loaded on the first posterior

    a, b = a0 + successes, b0 + failures
    lcb = float(betaincinv(a, b, 1.0 - conf))
    return Posterior(a, b, int(round(successes + failures)), a / (a + b), lcb)


def wilson_lcb(successes: int, n: int, *, z: float = 1.2816) -> float:
    """Wilson score lower bound of a success rate (``z = 1.2816``: one-sided 90%).

    Examples
    --------
    >>> round(wilson_lcb(0, 10), 3), round(wilson_lcb(9, 10), 3)
    (0.0, 0.718)
    """
    if n <= 0:
        return 0.0
    if not 0 <= successes <= n:
        raise InvalidInput(f"successes must be in [0, n], got {successes} of {n}")
    p = successes / n
    den = 1 + z * z / n
    centre = p + z * z / (2 * n)
    rad = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - rad) / den)


@dataclass(frozen=True)
class QuarantineDecision:
    """Whether to evict/quarantine, the statistic it read, and the reason for the log."""

    quarantine: bool
    score: float
    reason: str


def feedback_quarantine(
    successes: int,
    failures: int,
    *,
    min_uses: int = 4,
    threshold: float = 0.15,
    method: Literal["wilson", "beta"] = "wilson",
    conf: float = 0.9,
) -> QuarantineDecision:
    """Feedback quarantine: evict an entry whose success lower bound is below ``threshold``.

    Applies only after ``min_uses`` outcomes, and whatever the budget: an entry that keeps
    failing is removed, not just demoted (CURATOR Fig. 7b only demotes it).

    Parameters
    ----------
    successes, failures : int
        Outcomes of the tasks the entry was injected into.
    min_uses : int, default 4
    threshold : float, default 0.15
        On the lower bound of the success rate. With Wilson at 90%: 0 of 4 uses successful gives
        a lower bound of 0 and 1 of 4 gives 0.08 (both evicted); 2 of 4 gives 0.23 (kept).
    method : {"wilson", "beta"}
        Wilson score bound, or the Beta(1, 1) posterior's ``1 - conf`` quantile.
    conf : float, default 0.9

    Returns
    -------
    QuarantineDecision

    Raises
    ------
    InvalidInput
        Negative counts, ``min_uses < 1``, unknown method.

    Examples
    --------
    >>> feedback_quarantine(0, 10).quarantine, feedback_quarantine(8, 2).quarantine
    (True, False)
    >>> feedback_quarantine(0, 2).reason
    'feedback: 2 uses < min_uses=4, not judged'
    """
    if successes < 0 or failures < 0:
        raise InvalidInput("successes and failures must be >= 0")
    if min_uses < 1:
        raise InvalidInput(f"min_uses must be >= 1, got {min_uses}")
    if method not in ("wilson", "beta"):
        raise InvalidInput(f"method must be 'wilson' or 'beta', got {method!r}")
    n = successes + failures
    if n < min_uses:
        return QuarantineDecision(
            False, float("nan"), f"feedback: {n} uses < min_uses={min_uses}, not judged"
        )
    if method == "wilson":
        z = float(math.sqrt(2) * _erfinv(2 * conf - 1))
        lcb = wilson_lcb(successes, n, z=z)
    else:
        lcb = beta_posterior(successes, failures, conf=conf).lcb
    if lcb < threshold:
        return QuarantineDecision(
            True,
            lcb,
            f"feedback quarantine: {successes}/{n} successes, {method} lcb={lcb:.3f} "
            f"< {threshold:g}",
        )
    return QuarantineDecision(False, lcb, f"feedback: lcb={lcb:.3f} >= {threshold:g}")


def _erfinv(y: float) -> float:
    from scipy.special import erfinv

    return float(erfinv(y))


def _add_outcome(table: dict[str, list[float]], peer: str, reward: float) -> list[float]:
    """Add one outcome ``reward`` in [0, 1] to ``peer``'s ``[successes, failures]`` in
    ``table`` (soft counts: ``reward`` and ``1 - reward``); returns that row.

    Raises
    ------
    InvalidInput
        Empty peer, reward not a finite number in [0, 1] (``table`` is left unchanged).
    """
    if not isinstance(peer, str) or not peer:
        raise InvalidInput("peer must be a non-empty string")
    r = float(reward)
    if not math.isfinite(r) or not 0.0 <= r <= 1.0:
        raise InvalidInput(f"reward must be in [0, 1], got {reward!r}")
    c = table.setdefault(peer, [0.0, 0.0])
    c[0] += r
    c[1] += 1.0 - r
    return c


class PeerReputation:
    """Beta reputation of each peer over the outcomes of its entries used here.

    Parameters
    ----------
    prior : tuple of float, default (1.0, 1.0)
        Beta(α₀, β₀) prior of every new peer.
    conf : float, default 0.9
        Confidence of the lower bound.
    threshold : float, default 0.3
        A peer is quarantined when its statistic (``on``) falls below this.
    min_outcomes : int, default 5
        Outcomes needed before a peer can be quarantined.
    on : {"mean", "lcb"}, default "mean"
        Statistic compared with ``threshold``. ``"lcb"`` quarantines sooner (more false alarms).
    weight : {"lcb", "mean"}, default "lcb"
        Reputation used by :meth:`shrink_q`: the lower bound makes a new peer's advertisement
        count for little (Beta(1,1): 0.1) and only sustained success earns weight.
    release_threshold : float, default 0.3
        Good standing (:meth:`good_standing`): a peer may release its entries off probation
        with a signed outcome claim (:mod:`memcurator.trust.outcome`) while the posterior mean
        of the outcomes of the entries it released that way (:meth:`learn_claim`; Beta(1, 1)
        prior) is at least this, and it is not quarantined. A peer whose released entries all
        fail loses standing after 2 failures (mean 1/4 < 0.3).
    release_credit : int, default 2
        Bounded release credit (:meth:`may_release`): a peer in good standing may have at most
        ``release_credit + earned − strikes`` entries released on its claims whose outcome
        this receiver has not seen yet. ``earned`` counts the released entries the receiver
        saw succeed since the peer's last failure (a failure resets it); ``strikes`` counts
        failures, each paid back by one later success. A peer with no confirmed history can
        thus release at most ``release_credit`` entries before their first outcome here: the
        poison a compromised peer releases before it is detected is bounded by a constant,
        not by a share of what it sends. Verified claims beyond the credit wait on probation
        until confirmations arrive (:func:`memcurator.lifecycle.admission.release_waiting`).
    max_credit : int, default 16
        Cap of ``release_credit + earned``: what even a long-confirmed peer may have
        outstanding unconfirmed (its worst case once compromised).

    Examples
    --------
    >>> rep = PeerReputation()
    >>> for _ in range(6):
    ...     rep.learn_one("p1", 0.0)
    >>> rep.is_quarantined("p1")
    True
    >>> round(rep.shrink_q("p2", q_adv=1.0, q_prior=0.2), 3)  # unknown peer: near the prior
    0.28
    """

    def __init__(
        self,
        prior: tuple[float, float] = (1.0, 1.0),
        conf: float = 0.9,
        threshold: float = 0.3,
        min_outcomes: int = 5,
        on: Literal["mean", "lcb"] = "mean",
        weight: Literal["lcb", "mean"] = "lcb",
        release_threshold: float = 0.3,
        release_credit: int = 2,
        max_credit: int = 16,
    ):
        if not 0.0 <= float(release_threshold) <= 1.0:
            raise InvalidInput(f"release_threshold must be in [0, 1], got {release_threshold!r}")
        if not 0 <= int(release_credit) <= int(max_credit):
            raise InvalidInput(
                f"need 0 <= release_credit <= max_credit, got {release_credit!r}, {max_credit!r}"
            )
        self.release_credit = int(release_credit)
        self.max_credit = int(max_credit)
        self.release_threshold = float(release_threshold)
        self.prior = prior
        self.conf = conf
        self.threshold = threshold
        self.min_outcomes = min_outcomes
        self.on = on
        self.weight = weight
        self._counts: dict[str, list[float]] = {}
        self._quarantine: dict[str, str] = {}
        self._released: dict[str, int] = {}  # outcomes at release: judge only what came after
        self.log: list[tuple[str, str, str]] = []  # (peer, "quarantine" | "release", reason)
        # outcomes of entries released on the peer's signed outcome claims: [successes, failures]
        self._claims: dict[str, list[float]] = {}
        # first loss of standing per peer: [failures, outcomes] of its released entries then
        self._lost: dict[str, list[float]] = {}
        # release credit: ids released on the peer's claims with no outcome seen here yet, and
        # [earned, strikes] (confirmations since its last failure; unpaid failures)
        self._pending: dict[str, list[str]] = {}
        self._credit: dict[str, list[int]] = {}

    def posterior(self, peer: str) -> Posterior:
        """The peer's current Beta posterior (the prior for an unknown peer)."""
        s, f = self._counts.get(peer, [0.0, 0.0])
        return beta_posterior(s, f, prior=self.prior, conf=self.conf)

    def learn_one(self, peer: str, reward: float) -> None:
        """Record the outcome ``reward`` in [0, 1] of a task one of the peer's entries was used in.

        Quarantines the peer when its statistic falls below the threshold.

        Raises
        ------
        InvalidInput
            Empty peer, reward not a finite number in [0, 1].
        """
        _add_outcome(self._counts, peer, reward)
        self._check(peer)

    def _check(self, peer: str) -> None:
        if peer in self._quarantine:
            return
        p = self.posterior(peer)
        if p.n - self._released.get(peer, 0) < self.min_outcomes:
            return
        stat = p.mean if self.on == "mean" else p.lcb
        if stat < self.threshold:
            reason = (
                f"peer quarantine: {self.on}={stat:.3f} < {self.threshold:g} over {p.n} outcomes "
                f"(Beta({p.alpha:g}, {p.beta:g}))"
            )
            self._quarantine[peer] = reason
            self.log.append((peer, "quarantine", reason))

    def learn_claim(self, peer: str, reward: float, entry: str | None = None) -> None:
        """Record the outcome ``reward`` in [0, 1] of a task that used an entry released off
        probation on ``peer``'s signed outcome claim (also a :meth:`learn_one` outcome).

        ``entry`` is that entry's id: its first outcome here settles its release credit
        (:meth:`may_release`): a success (``reward >= 0.5``) earns the peer one more release
        and pays back a strike, a failure resets what it earned and is a strike.

        The first time the peer falls out of good standing, the failures and outcomes it had
        then are kept (:meth:`standing_lost`).

        Raises
        ------
        InvalidInput
            Empty peer, reward not a finite number in [0, 1].

        Examples
        --------
        >>> rep = PeerReputation()
        >>> rep.learn_claim("p1", 0.0); rep.good_standing("p1")
        ''
        >>> rep.learn_claim("p1", 0.0); rep.good_standing("p1")[:40]
        'claim standing 0.250 < release threshold'
        >>> rep.standing_lost("p1")
        (2, 2)
        """
        c = _add_outcome(self._claims, peer, reward)
        r = float(reward)
        cr = self._credit.setdefault(peer, [0, 0])
        pending = self._pending.get(peer, [])
        if r < 0.5:  # any failure of what it released: earned credit is gone, one strike
            cr[0], cr[1] = 0, cr[1] + 1
            if entry in pending:
                pending.remove(entry)
        elif entry is not None and entry in pending:  # first outcome here of this release
            pending.remove(entry)
            cr[0], cr[1] = cr[0] + 1, max(0, cr[1] - 1)
        if peer not in self._lost and self.good_standing(peer):
            self._lost[peer] = [c[1], c[0] + c[1]]

    def credit(self, peer: str) -> int:
        """How many more entries ``peer`` may release on its claims now (>= 0; see
        ``release_credit``): ``min(max_credit, release_credit + earned) − pending − strikes``.

        Examples
        --------
        >>> rep = PeerReputation(release_credit=2)
        >>> rep.note_release("p1", "e1"); rep.note_release("p1", "e2"); rep.credit("p1")
        0
        >>> rep.learn_claim("p1", 1.0, "e1"); rep.credit("p1")  # e1 worked here: 3 - 1
        2
        >>> rep.learn_claim("p1", 0.0, "e2"); rep.credit("p1")  # e2 failed: 2 - 0 - 1
        1
        """
        earned, strikes = self._credit.get(peer, [0, 0])
        window = min(self.max_credit, self.release_credit + earned)
        return max(0, window - len(self._pending.get(peer, [])) - strikes)

    def note_release(self, peer: str, entry: str) -> None:
        """Count ``entry`` as released on ``peer``'s claim, its outcome not seen here yet."""
        p = self._pending.setdefault(peer, [])
        if entry not in p:
            p.append(entry)

    def pending(self, peer: str) -> list[str]:
        """Ids released on ``peer``'s claims whose outcome this receiver has not seen yet."""
        return list(self._pending.get(peer, []))

    def drop_pending(self, keep: Any) -> None:
        """Forget pending releases whose id ``keep(id)`` rejects (evicted, forgotten,
        withdrawn): they will never have an outcome here."""
        for peer, ids in self._pending.items():
            self._pending[peer] = [i for i in ids if keep(i)]

    def may_release(self, peer: str) -> str:
        """Why ``peer``'s verified claim may not release an entry now ('' when it may): out of
        :meth:`good_standing`, or no release :meth:`credit` left."""
        why = self.good_standing(peer)
        if why or self.credit(peer) > 0:
            return why
        earned, strikes = self._credit.get(peer, [0, 0])
        return (
            f"no release credit: {len(self._pending.get(peer, []))} released entries await an "
            f"outcome here (credit {self.release_credit} + {earned} confirmed, "
            f"{strikes} strikes)"
        )

    def claim_standing(self, peer: str) -> float:
        """Posterior mean (Beta(1, 1) prior) of the outcomes of the entries released on
        ``peer``'s outcome claims (0.5 for a peer that released none)."""
        s, f = self._claims.get(peer, [0.0, 0.0])
        return (1.0 + s) / (2.0 + s + f)

    def good_standing(self, peer: str) -> str:
        """Why ``peer`` may not release entries on its outcome claims now ('' when it may):
        quarantined, or :meth:`claim_standing` below ``release_threshold``."""
        q = self.quarantine_reason(peer)
        if q is not None:
            return f"peer quarantined ({q})"
        st = self.claim_standing(peer)
        if st < self.release_threshold:
            s, f = self._claims.get(peer, [0.0, 0.0])
            return (
                f"claim standing {st:.3f} < release threshold {self.release_threshold:g} "
                f"({s:g} successes, {f:g} failures of entries released on its claims)"
            )
        return ""

    def standing_lost(self, peer: str) -> tuple[int, int] | None:
        """(failures, outcomes) of ``peer``'s claim-released entries when it first lost good
        standing by them, or None if it never did."""
        x = self._lost.get(peer)
        return None if x is None else (int(round(x[0])), int(round(x[1])))

    def lost_peers(self) -> list[str]:
        """Peers that lost good standing by their claims at some point, sorted."""
        return sorted(self._lost)

    def is_quarantined(self, peer: str) -> bool:
        """Whether entries from ``peer`` are currently refused."""
        return peer in self._quarantine

    def quarantine_reason(self, peer: str) -> str | None:
        """Why ``peer`` is quarantined, or None."""
        return self._quarantine.get(peer)

    def release(self, peer: str, reason: str, *, reset: bool = False) -> None:
        """Lift a quarantine (e.g. after the peer's key was rotated following a compromise).

        Parameters
        ----------
        peer : str
        reason : str
            Logged with the release.
        reset : bool, default False
            Forget the peer's past outcomes (start again from the prior); otherwise it is judged
            again after ``min_outcomes`` new outcomes.

        Raises
        ------
        InvalidInput
            The peer is not quarantined, or no reason is given.
        """
        if peer not in self._quarantine:
            raise InvalidInput(f"peer {peer!r} is not quarantined")
        if not reason:
            raise InvalidInput("say why the quarantine is lifted")
        del self._quarantine[peer]
        if reset:
            self._counts.pop(peer, None)
            self._released.pop(peer, None)
        else:
            self._released[peer] = self.posterior(peer).n
        self.log.append((peer, "release", reason))

    def reputation(self, peer: str) -> float:
        """The weight in [0, 1] given to the peer's advertised numbers (0 when quarantined)."""
        if self.is_quarantined(peer):
            return 0.0
        p = self.posterior(peer)
        return p.lcb if self.weight == "lcb" else p.mean

    def shrink_q(self, peer: str, q_adv: float, q_prior: float) -> float:
        """``r·q_adv + (1 − r)·q_prior`` with ``r`` the peer's :meth:`reputation`.

        Raises
        ------
        InvalidInput
            Non-finite ``q_adv`` or ``q_prior``.
        """
        if not (math.isfinite(q_adv) and math.isfinite(q_prior)):
            raise InvalidInput(f"q_adv={q_adv!r} and q_prior={q_prior!r} must be finite")
        r = self.reputation(peer)
        return r * q_adv + (1.0 - r) * q_prior

    def state(self) -> dict[str, Any]:
        """Plain-data state (JSON-able) for the policy state: outcomes, quarantines, releases."""
        return {
            "counts": {p: list(c) for p, c in self._counts.items()},
            "quarantine": dict(self._quarantine),
            "released": dict(self._released),
            "log": [list(x) for x in self.log],
            "claims": {p: list(c) for p, c in self._claims.items()},
            "lost": {p: list(c) for p, c in self._lost.items()},
            "pending": {p: list(c) for p, c in self._pending.items()},
            "credit": {p: list(c) for p, c in self._credit.items()},
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` returned (a state of another shape is ignored)."""
        counts = state.get("counts")
        if not isinstance(counts, dict):
            return
        self._counts = {str(p): [float(c[0]), float(c[1])] for p, c in counts.items()}
        self._quarantine = {str(k): str(v) for k, v in dict(state.get("quarantine") or {}).items()}
        self._released = {str(k): int(v) for k, v in dict(state.get("released") or {}).items()}
        self.log = [(str(a), str(b), str(c)) for a, b, c in list(state.get("log") or [])]
        self._claims = {
            str(p): [float(c[0]), float(c[1])] for p, c in dict(state.get("claims") or {}).items()
        }
        self._lost = {
            str(p): [float(c[0]), float(c[1])] for p, c in dict(state.get("lost") or {}).items()
        }
        self._pending = {
            str(p): [str(i) for i in c] for p, c in dict(state.get("pending") or {}).items()
        }
        self._credit = {
            str(p): [int(c[0]), int(c[1])] for p, c in dict(state.get("credit") or {}).items()
        }
