"""The write path: validate, reinforce an identical resident, admit through the policy's gate,
then run the Keep pass. Every admission and rejection is in the decision log with its reason."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, TypedDict

from memcurator.errors import InvalidInput
from memcurator.lifecycle.admission import (
    Admission,
    check_signature_type,
    hold_tool_output,
    log_downgrades,
    oversize,
    screen,
    set_probation,
)
from memcurator.lifecycle.agree import release_by_agreement
from memcurator.lifecycle.checks import (
    MAX_DETAIL_BYTES,
    check_detail,
    check_meta,
    check_stats,
    check_text,
    dedup_key,
    embed_checked,
    sha1,
)
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.keep import GovernResult, keep_pass
from memcurator.store.sizing import stats_bytes
from memcurator.trust import state
from memcurator.trust.auth import Claim, Signature
from memcurator.trust.provenance import corroborate, parse_sources, vouch
from memcurator.trust.state import HELD_FOR, PROBATION, VOUCHED
from memcurator.types import KINDS, ORIGINS, Entry


@dataclass
class WriteResult:
    """What happened to one write.

    Attributes
    ----------
    id : str or None
        The entry id (None when rejected before an id was useful).
    admitted : bool
        The entry is in memory now: it passed the gate (or reinforced an identical resident)
        and the Keep pass it triggered did not evict it. An entry the gate admitted and that
        pass then evicted is not admitted (``id`` in ``evicted``; the reason says so; the log
        has both its ``admit`` and its ``evict`` row).
    reason : str
    score : float
        The policy's admission score (NaN where none applies).
    evicted : list of str
        Ids evicted by the governance pass this write triggered (``id`` only when not
        ``admitted``).
    distilled : list of str
        Ids distilled in that pass.

    Raises
    ------
    InvalidInput
        ``admitted`` with ``id`` in ``evicted``: fields that contradict each other.
    """

    id: str | None
    admitted: bool
    reason: str
    score: float = float("nan")
    evicted: list[str] = field(default_factory=list)
    distilled: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.admitted and self.id is not None and self.id in self.evicted:
            raise InvalidInput(
                f"a WriteResult cannot be admitted with its own id {self.id!r} evicted"
            )

    @staticmethod
    def kept(
        eid: str, reason: str, score: float, evicted: list[str], distilled: list[str]
    ) -> WriteResult:
        """The result of an entry the gate admitted and its Keep pass ran on: not admitted when
        that pass evicted it."""
        if eid in evicted:
            reason += "; then evicted by the Keep pass this write triggered (decision log: evict)"
            return WriteResult(eid, False, reason, score, evicted, distilled)
        return WriteResult(eid, True, reason, score, evicted, distilled)


class WriteOptions(TypedDict, total=False):
    """The keyword arguments of :func:`write` (and :meth:`memcurator.Memory.write`)."""

    origin: str
    kind: str
    origin_detail: str
    raw_text: str | None
    meta: dict[str, Any] | None
    step: int | None
    raw_bytes: int | None
    stats: dict[str, float] | None
    signature: Any
    user: str | None
    personal: bool
    derived_from: Any


def write(
    ctx: Context,
    text: Any,
    *,
    origin: str = "self",
    kind: str = "insight",
    origin_detail: str = "",
    raw_text: str | None = None,
    meta: dict[str, Any] | None = None,
    step: int | None = None,
    raw_bytes: int | None = None,
    stats: dict[str, float] | None = None,
    signature: Any = None,
    user: str | None = None,
    personal: bool = False,
    derived_from: Any = None,
) -> WriteResult:
    """Offer one entry: the policy's admission gate, de-duplication, then the Keep pass.

    Parameters
    ----------
    text : str or UTF-8 bytes
        What is stored and later injected.
    origin : {"self", "peer", "external"}
    kind : {"raw", "insight", "skill"}
    origin_detail : str
        Peer id, tool name, ``"expert"``; at most 256 UTF-8 bytes, counted in ``b(m)``.
    raw_text : str, optional
        The raw trajectory this entry was distilled from; its size is ``b⁰``.
    meta : dict, optional
        JSON-able metadata (family, task id, evaluation metrics, ...); counted in ``b(m)``
        by the default ``sizeof``, at most ``max_text_bytes`` as JSON.
    step : int, optional
        Logical time; defaults to the memory's step counter.
    raw_bytes : int, optional
        ``b⁰`` given directly (a peer's advertised abstraction gain × b).
    stats : dict, optional
        Initial per-method statistics (a peer's advertised ``q_adv``).
    signature : Signature, optional
        Proof of a ``self``/``peer`` origin under the memory's ``keyring`` (:func:`sign`).
        Missing or invalid with a keyring: the write is handled as ``external`` (logged as
        ``downgrade``).
    user : str, optional
        Scope the entry to one user of the namespace (``recall(user=...)``).
    personal : bool, default False
        Personal data of ``user``: never shared to peers.
    derived_from : list of str or dict, optional
        What the content was derived from (:func:`memcurator.trust.provenance.parse_sources`):
        ``"tool_output"``, ``"web"``, ``"user"``, ``"document"``, ``"peer"`` (each optionally
        ``"kind:id"``) or ``"entry:<id>"`` of this memory (one evicted since counts as
        outside). Kept in the entry's ``trust["_derived_from"]``.
        A claim more trusted than its sources (``self`` for content read from a web page) is
        handled as the least trusted source (logged as ``downgrade``, ``trust["_taint"]``); an
        entry source counts as ``self`` once it is injectable.
        Undeclared sources count too: a text that copies outside content this handle observed
        (:meth:`memcurator.Memory.observe_read`, :mod:`memcurator.lifecycle.reads`) is handled
        as if it had declared that source (marked ``"via": "observed"``; the ``downgrade`` row
        says ``"copies N words observed from <source>"``).

    Returns
    -------
    WriteResult

    Notes
    -----
    Duplicates are found on the text with case folded and whitespace collapsed
    (:func:`memcurator.lifecycle.write.dedup_key`): writing one again reinforces it.

    Raises
    ------
    InvalidInput
        Empty, whitespace-only, content-free (only emoji, symbols or punctuation),
        oversized or invalid UTF-8 text; an embedding that is zero, NaN or infinite;
        unknown origin or kind; ``meta`` that is not JSON-serialisable or too large; an
        ``origin_detail`` over 256 bytes; a negative or non-integer ``step``; a
        ``signature`` given to a memory without a keyring; ``stats`` that is not a dict of
        str to finite numbers; a malformed ``derived_from`` or one naming an entry that was
        never in the namespace.

    Notes
    -----
    Under a policy with probation (curator's trust gate), an admitted entry whose trusted
    origin is not ``self`` is kept on probation (``trust["_probation"]``; recall does not
    inject it, :func:`memcurator.trust.provenance.injectable`) until corroborated: by
    :func:`memcurator.lifecycle.feedback.feedback` with ``verified=True`` and a success, or by
    the same text written by two distinct authenticated principals, or by agreement with
    independent trusted entries about the same request (policy ``agreement``,
    :mod:`memcurator.lifecycle.agree`); each release is logged ``corroborate``. An own
    (``self``) record whose tool output tells its reader to do something of a harm class
    (:func:`memcurator.trust.domains.tool_output_instructions`) is kept on probation too, held
    for what it says (``trust["_held_for"]``): only a verified outcome releases it.
    BudgetExceeded
        The entry alone is larger than ``max_bytes`` (logged as a rejection first).
    """
    adm = _admission(ctx, text, origin, kind, origin_detail, meta, user=user, personal=personal)
    check_step(step)
    stats = check_stats(stats)
    adm.sources = parse_sources(derived_from)
    check_signature_type(ctx.keyring, signature)
    e = embed_checked(ctx.embedder.embed, adm.text)
    with ctx.transaction():
        st = ctx.step if step is None else int(step)
        e = ctx.sizing.stored(e)  # in the namespace's precision, read after the sync above
        screen(ctx, adm, signature, user)
        existing = ctx.res.by_key(adm.meta["text_sha1"])
        if existing is not None:
            return _reinforce(ctx, st, existing, adm)
        on_probation = set_probation(adm, bool(ctx.policy.probation))
        cand = _candidate(ctx, adm, e, st, stats, raw_text, raw_bytes)
        log_downgrades(ctx.log, st, cand.id, cand.bytes, adm)
        oversized = oversize(
            ctx.log,
            st,
            cand.id,
            cand.bytes,
            ctx.max_bytes,
            "entry of {b} bytes is larger than the whole budget max_bytes={max_bytes}",
            "entry of {b} bytes can never fit max_bytes={max_bytes}; distill it or raise the "
            "budget",
        )
        if oversized is None:
            ok, score, reason = ctx.policy.admit(cand, ctx.res.entries, ctx.res.matrix, st)
            if not ok:
                ctx.log(st, "reject", cand.id, score, reason, cand.bytes)
                return WriteResult(cand.id, False, reason, score)
            if on_probation:
                reason += (
                    f"; on probation ({adm.trust[PROBATION]}): kept, not injected until "
                    "corroborated"
                )
            g = _store(ctx, st, cand, score, reason)
    if oversized is not None:
        raise oversized
    return WriteResult.kept(cand.id, reason, score, g.evicted, g.distilled)


def check_step(step: Any) -> None:
    """Refuse a ``step`` that is not None or an integer >= 0 (:class:`InvalidInput`)."""
    if step is not None and (
        isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0
    ):
        raise InvalidInput(f"step must be an integer >= 0, got {step!r}")


def _admission(
    ctx: Context,
    text: Any,
    origin: str,
    kind: str,
    origin_detail: Any,
    meta: dict[str, Any] | None,
    *,
    user: str | None,
    personal: bool,
) -> Admission:
    """The checked text, origin, kind, detail and metadata of a new entry.

    Raises
    ------
    InvalidInput
        See :func:`write`.
    """
    text = check_text(text, ctx.max_text_bytes)
    if origin not in ORIGINS:
        raise InvalidInput(f"origin must be one of {list(ORIGINS)}, got {origin!r}")
    if kind not in KINDS:
        raise InvalidInput(f"kind must be raw, insight or skill, got {kind!r}")
    user_meta, scope = check_meta(meta, ctx.max_text_bytes, user, personal)
    return Admission(
        text,
        kind,
        origin,
        check_detail(origin_detail),
        user_meta | {"text_sha1": dedup_key(text)},
        origin,
        fresh=True,
        trust=scope,
    )


def _reinforce(ctx: Context, st: int, existing: Entry, adm: Admission) -> WriteResult:
    """The same text written again: reinforce the resident copy; two authenticated principals
    vouching for an entry on probation (not one held for what it says) corroborate it."""
    existing.reinforcement += 1
    agreed = False
    t = state.of(existing)
    if PROBATION in t and HELD_FOR not in t and adm.proven:
        if vouch(t, f"{adm.origin}:{adm.detail}"):
            agreed = corroborate(t, f"agreement of {len(t[VOUCHED])} authenticated sources")
    ctx.res.edited([existing.id])
    ctx.store.update(existing)
    ctx.log(
        st,
        "reinforce",
        existing.id,
        float("nan"),
        f"same text written again by {adm.origin}; reinforcement={existing.reinforcement}",
        existing.bytes,
    )
    if agreed:
        ctx.log(
            st,
            "corroborate",
            existing.id,
            float("nan"),
            "off probation: same text from authenticated sources " + ", ".join(t[VOUCHED]),
            existing.bytes,
        )
    return WriteResult(existing.id, True, "reinforced an identical resident entry")


def _candidate(
    ctx: Context,
    adm: Admission,
    e: Any,
    st: int,
    stats: dict[str, float],
    raw_text: str | None,
    raw_bytes: int | None,
) -> Entry:
    """The new entry as it would be stored, sized: every stored field counts (text, meta and
    embedding through ``sizeof``, the origin detail and the statistics the caller wrote)."""
    ctx.energy.add(len(adm.text.encode("utf-8")))
    extra = len(adm.detail.encode("utf-8")) + stats_bytes(stats)
    sized = state.sized_meta(adm.meta, adm.trust)
    b = ctx.sizing.entry_bytes(adm.text, sized, e) + extra
    b0 = ctx.sizing.entry_bytes(raw_text, sized, e) + extra if raw_text else b
    if raw_bytes is not None:
        b0 = int(raw_bytes)
    return Entry(
        ctx.new_id(adm.text),
        ctx.namespace,
        adm.kind,
        adm.text,
        b,
        max(b0, b),
        e,
        adm.origin,
        adm.detail,
        created_step=st,
        meta=adm.meta,
        stats=stats,
        trust=adm.trust,
    )


def _store(ctx: Context, st: int, cand: Entry, score: float, reason: str) -> GovernResult:
    """Insert the admitted ``cand``, log it, release by agreement, run the Keep pass."""
    ctx.store.insert(cand)
    ctx.res.add(cand)
    ctx.log(st, "admit", cand.id, score, reason, cand.bytes)
    if ctx.policy.probation:
        release_by_agreement(ctx, st, cand)
    g = keep_pass(ctx, st)
    ctx.save_state()
    return g


def sign(ctx: Context, text: str, *, kind: str = "insight", origin_detail: str = "") -> Signature:
    """The owner's :class:`~memcurator.trust.auth.Signature` for writing ``text`` with
    ``origin="self"`` in ``ctx``'s namespace.

    Raises
    ------
    InvalidInput
        No keyring, or its owner key is revoked.
    """
    if ctx.keyring is None:
        raise InvalidInput("this memory has no keyring; pass keyring= to sign writes")
    return ctx.keyring.sign(Claim(ctx.namespace, "self", origin_detail, kind, text))


__all__ = [
    "MAX_DETAIL_BYTES",
    "WriteOptions",
    "WriteResult",
    "check_detail",
    "check_meta",
    "check_text",
    "dedup_key",
    "embed_checked",
    "check_step",
    "hold_tool_output",
    "sha1",
    "sign",
    "write",
]
