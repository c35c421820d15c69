"""The write path: validate, reinforce an identical resident, admit through the policy's gate,
then run the Keep pass. Every admission and rejection is in the decision log with its reason."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, TypedDict

from memcurator.errors import BudgetExceeded, InvalidInput
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
from memcurator.lifecycle.keep import keep_pass
from memcurator.lifecycle.reads import observed_reason, observed_sources
from memcurator.store.sizing import stats_bytes
from memcurator.trust.auth import Claim, Signature
from memcurator.trust.domains import tool_output_instructions
from memcurator.trust.provenance import (
    CHANNEL_ORDER,
    DERIVED_FROM,
    HELD_FOR,
    PROBATION,
    TAINT,
    VOUCHED,
    corroborate,
    entry_taint,
    parse_sources,
    taint_of,
    vouch,
)
from memcurator.types import KINDS, ORIGINS, Entry


@dataclass
class WriteResult:
    """What happened to one write.

    Attributes
    ----------
    id : str or None
        The entry id (None when rejected before an id was useful).
    admitted : bool
    reason : str
    score : float
        The policy's admission score (NaN where none applies).
    evicted : list of str
        Ids evicted by the governance pass this write triggered (may include ``id`` itself).
    distilled : list of str
        Ids distilled in that pass.
    """

    id: str | None
    admitted: bool
    reason: str
    score: float = float("nan")
    evicted: list[str] = field(default_factory=list)
    distilled: list[str] = field(default_factory=list)


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
        outside). Kept in ``meta["_derived_from"]``.
        A claim more trusted than its sources (``self`` for content read from a web page) is
        handled as the least trusted source (logged as ``downgrade``, ``meta["_taint"]``); an
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
    origin is not ``self`` is kept on probation (``meta["_probation"]``; recall does not
    inject it, :func:`memcurator.trust.provenance.injectable`) until corroborated: by
    :func:`memcurator.lifecycle.feedback.feedback` with ``verified=True`` and a success, or by
    the same text written by two distinct authenticated principals, or by agreement with
    independent trusted entries about the same request (policy ``agreement``,
    :mod:`memcurator.lifecycle.agree`); each release is logged ``corroborate``. An own
    (``self``) record whose tool output tells its reader to do something of a harm class
    (:func:`memcurator.trust.domains.tool_output_instructions`) is kept on probation too, held
    for what it says (``meta["_held_for"]``): only a verified outcome releases it.
    BudgetExceeded
        The entry alone is larger than ``max_bytes`` (logged as a rejection first).
    """
    text = check_text(text, ctx.max_text_bytes)
    if origin not in ORIGINS:
        raise InvalidInput(f"origin must be one of {list(ORIGINS)}, got {origin!r}")
    if kind not in KINDS:
        raise InvalidInput(f"kind must be raw, insight or skill, got {kind!r}")
    if step is not None and (
        isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0
    ):
        raise InvalidInput(f"step must be an integer >= 0, got {step!r}")
    detail = check_detail(origin_detail)
    meta = check_meta(meta, ctx.max_text_bytes, user, personal)
    stats = check_stats(stats)
    meta["text_sha1"] = dedup_key(text)
    sources = parse_sources(derived_from)
    # what the text copies of the outside content this handle observed (declared or not)
    observed, match = observed_sources(ctx, text, user)
    claimed = origin
    origin, downgrade = verify_origin(ctx, text, origin, detail, kind, signature)
    # authenticated: a key ring proved the claim (without one, nothing is proven)
    proven = ctx.keyring is not None and not downgrade and origin in ("self", "peer")
    if downgrade:
        meta["claimed_origin"] = claimed
    e = embed_checked(ctx.embedder.embed, text)
    oversized: BudgetExceeded | None = None
    with ctx.transaction():
        st = ctx.step if step is None else int(step)
        res = ctx.res
        e = ctx.sizing.stored(e)  # in the namespace's precision, read after the sync above
        taint_why = ""
        if sources or observed:
            meta[DERIVED_FROM] = sources + observed
            taints = {
                s["id"]: entry_taint(m.meta, m.origin)
                for s in sources
                if s["kind"] == "entry" and (m := res.get(s["id"])) is not None
            }
            gone = [s["id"] for s in sources if s["kind"] == "entry" and s["id"] not in taints]
            if gone:
                # evicted or forgotten since it was read: its standing is unknown now, so it
                # counts as outside; an id never seen here is a caller's error
                known = ctx.store.known_ids(ctx.namespace, gone)
                taints.update({i: "external" for i in gone if i in known})
            taint = taint_of(sources + observed, taints)
            if taint != "self":
                meta[TAINT] = taint
            if CHANNEL_ORDER.index(taint) > CHANNEL_ORDER.index(origin):
                why = []
                if sources:
                    names = ", ".join(
                        f"{s['kind']}:{s['id']}" if s["id"] else s["kind"] for s in sources
                    )
                    why.append(f"{origin} claim for content derived from {names}")
                if match is not None:
                    why.append(observed_reason(match))
                claim = "" if sources else f"{origin} claim "
                taint_why = "taint: " + "; ".join(why) + f"; {claim}handled as {taint}"
                meta.setdefault("claimed_origin", claimed)
                origin, proven = taint, False
        existing = res.by_key(meta["text_sha1"])
        if existing is not None:
            existing.reinforcement += 1
            agreed = False
            if PROBATION in existing.meta and HELD_FOR not in existing.meta and proven:
                principal = f"{origin}:{detail}"
                if vouch(existing.meta, principal):
                    agreed = corroborate(
                        existing.meta,
                        f"agreement of {len(existing.meta[VOUCHED])} authenticated sources",
                    )
            res.edited([existing.id])
            ctx.store.update(existing)
            ctx.log(
                st,
                "reinforce",
                existing.id,
                float("nan"),
                f"same text written again by {origin}; reinforcement={existing.reinforcement}",
                existing.bytes,
            )
            if agreed:
                ctx.log(
                    st,
                    "corroborate",
                    existing.id,
                    float("nan"),
                    "off probation: same text from authenticated sources "
                    + ", ".join(existing.meta[VOUCHED]),
                    existing.bytes,
                )
            return WriteResult(existing.id, True, "reinforced an identical resident entry")
        on_probation = bool(ctx.policy.probation) and origin != "self"
        if on_probation:
            meta[PROBATION] = f"origin {origin}" + (" (tainted)" if taint_why else "")
            if proven:
                meta[VOUCHED] = [f"{origin}:{detail}"]
        elif ctx.policy.probation:
            on_probation = hold_tool_output(meta, origin, text)
        ctx.energy.add(len(text.encode("utf-8")))
        # every stored field counts: text, meta and embedding (sizeof), the origin detail and
        # the statistics the caller wrote
        extra = len(detail.encode("utf-8")) + stats_bytes(stats)
        b = ctx.sizing.entry_bytes(text, meta, e) + extra
        b0 = ctx.sizing.entry_bytes(raw_text, meta, e) + extra if raw_text else b
        if raw_bytes is not None:
            b0 = int(raw_bytes)
        eid = ctx.new_id(text)
        if downgrade:
            ctx.log(st, "downgrade", eid, float("nan"), downgrade, b)
        if taint_why:
            ctx.log(st, "downgrade", eid, float("nan"), taint_why, b)
        cand = Entry(
            eid,
            ctx.namespace,
            kind,
            text,
            b,
            max(b0, b),
            e,
            origin,
            detail,
            created_step=st,
            meta=meta,
            stats=stats,
        )
        if ctx.max_bytes is not None and b > ctx.max_bytes:
            # Log and commit the rejection, then raise outside the transaction: raising inside
            # it would roll the 'reject' decision back with everything else.
            ctx.log(
                st,
                "reject",
                eid,
                float("nan"),
                f"entry of {b} bytes is larger than the whole budget max_bytes={ctx.max_bytes}",
                b,
            )
            oversized = BudgetExceeded(
                f"entry of {b} bytes can never fit max_bytes={ctx.max_bytes}; distill it or "
                "raise the budget"
            )
        else:
            ok, score, reason = ctx.policy.admit(cand, res.entries, res.matrix, st)
            if not ok:
                ctx.log(st, "reject", eid, score, reason, b)
                return WriteResult(eid, False, reason, score)
            if on_probation:
                reason += (
                    f"; on probation ({meta[PROBATION]}): kept, not injected until corroborated"
                )
            ctx.store.insert(cand)
            res.add(cand)
            ctx.log(st, "admit", eid, score, reason, b)
            if ctx.policy.probation:
                release_by_agreement(ctx, st, cand)
            g = keep_pass(ctx, st)
            ctx.save_state()
    if oversized is not None:
        raise oversized
    return WriteResult(eid, True, reason, score, g.evicted, g.distilled)


def hold_tool_output(meta: dict[str, Any], origin: str, text: str) -> bool:
    """Put an own record whose tool output carries an instruction on probation (mutating
    ``meta``); whether it did. Outside content inside the record, held for what it says
    (``meta["_held_for"]``), so only a verified outcome releases it, not more writers."""
    said = tool_output_instructions(text)
    if said:
        meta[PROBATION] = f"origin {origin}, its tool output instructs: {said[0]}"[:300]
        meta[HELD_FOR] = "tool output instruction"
    return bool(said)


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


def verify_origin(
    ctx: Context, text: str, origin: str, origin_detail: str, kind: str, signature: Any
) -> tuple[str, str]:
    """The origin the memory may act on, and the reason when a claim was downgraded.

    Without a key ring every claim is taken as given (``("origin", "")``). With one, a
    ``self`` or ``peer`` claim must carry a valid signature over
    :class:`~memcurator.trust.auth.Claim` ``(namespace, origin, origin_detail, kind, text)``;
    otherwise it is handled as ``"external"`` and the reason is returned for the decision log.

    Raises
    ------
    InvalidInput
        A signature given to a memory without a key ring, or one that is not a Signature.
    """
    if signature is not None and not isinstance(signature, Signature):
        raise InvalidInput(
            f"signature must be a Signature (Memory.sign / KeyRing.sign), got "
            f"{type(signature).__name__}"
        )
    ring = ctx.keyring
    if ring is None:
        if signature is not None:
            raise InvalidInput("a signature was given but this memory has no keyring to check it")
        return origin, ""
    v = ring.verify(Claim(ctx.namespace, origin, origin_detail, kind, text), signature)
    if v.downgraded:
        return "external", v.reason
    return origin, ""


__all__ = [
    "MAX_DETAIL_BYTES",
    "WriteOptions",
    "WriteResult",
    "check_detail",
    "check_meta",
    "check_text",
    "dedup_key",
    "embed_checked",
    "hold_tool_output",
    "sha1",
    "sign",
    "verify_origin",
    "write",
]
