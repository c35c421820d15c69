"""What the inspector shows, read from one tenant's :class:`~memcurator.Memory`.

Each function takes a memory the caller holds under its tenant lock and returns plain,
JSON-ready data; none changes anything except :func:`settle`, the probation queue's two
actions. They read the resident set in place (``memory._ctx.res``)
instead of :meth:`~memcurator.Memory.entries`, which copies every entry and its embedding:
at 10^5 entries a page of 50 rows must not cost a copy of the whole namespace.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from memcurator.errors import EntryNotFound, InvalidInput, MemcuratorError
from memcurator.memory import Memory
from memcurator.service.inspector.queries import (
    DecisionFilter,
    EntryFilter,
    RecallProbe,
    Where,
)
from memcurator.trust import state
from memcurator.trust.provenance import corroborate
from memcurator.types import Decision, Entry

#: the longest text preview of a row in a listing, characters
PREVIEW_CHARS = 160
Json = dict[str, Any]
#: the actions that begin an entry's story in the log (reading back stops there)
FIRST_ACTIONS = ("admit", "reject")
#: the most points of the bytes-over-time plot
PLOT_POINTS = 240
#: what an entry's state is called in the page
STATES = ("injectable", "probation", "distilled")
#: the glossary term each decision action is explained by (``memcurator explain``)
ACTION_TERMS = {
    "admit": "trust gate",
    "reject": "trust gate",
    "downgrade": "trust gate",
    "evict": "evictions",
    "distill": "bytes per entry",
    "corroborate": "contained trial",
    "trial": "contained trial",
    "quarantine": "peer group",
    "release": "peer group",
    "share": "peer group",
    "receive": "peer group",
}
#: one sentence per action: what the row means
ACTION_WORDS = {
    "admit": "admitted into the memory",
    "reject": "refused at the door (never stored)",
    "evict": "removed to keep the byte budget or by a keep rule",
    "distill": "shortened (distilled) before it would have fallen out",
    "forget": "hard-deleted on request (a tombstone)",
    "share": "sent to a peer",
    "receive": "offered by a peer",
    "replace": "replaced by a newer version of the same request",
    "reinforce": "written again: its reinforcement count grew",
    "downgrade": "its origin claim was not proven by a signature; treated as external",
    "quarantine": "a peer whose entries keep failing is refused",
    "release": "a peer's quarantine was lifted",
    "update": "its text was replaced through the trust checks",
    "notice": "a forget notice was sent to or taken from a peer",
    "compact": "old rows of the decision log were dropped by retention",
    "corroborate": "released from trust probation",
    "trial": "a contained, checked trial of an entry on probation",
}


def _res(memory: Memory) -> Any:
    ctx = memory._ctx  # the resident set, read in place (see the module notes)
    ctx.sync()
    return ctx.res


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def distilled_ids(memory: Memory) -> set[str]:
    """Ids the decision log says were distilled (the ``distill`` rows only)."""
    return {d.entry_id for d in memory.store.decisions(memory.namespace, action="distill")}


def state_of(e: Entry, distilled: set[str]) -> str:
    """``probation`` (kept, not injected), ``distilled`` or ``injectable``."""
    if state.on_probation(e):
        return "probation"
    return "distilled" if e.id in distilled else "injectable"


def row(e: Entry, distilled: set[str]) -> dict[str, Any]:
    """One listing row: no embedding, the text cut to :data:`PREVIEW_CHARS`."""
    text = e.text if len(e.text) <= PREVIEW_CHARS else e.text[: PREVIEW_CHARS - 1] + "…"
    return {
        "id": e.id,
        "kind": e.kind,
        "origin": e.origin,
        "origin_detail": e.origin_detail,
        "bytes": e.bytes,
        "state": state_of(e, distilled),
        "created_step": e.created_step,
        "uses": e.uses,
        "user": state.user_of(e),
        "preview": text,
    }


def overview(memory: Memory) -> dict[str, Any]:
    """The namespace at a glance: budget, policy, and entries by state, kind and origin."""
    res = _res(memory)
    ents = res.entries
    n = len(ents)
    held = int((ents.columns.column("on_probation") > 0).sum()) if n else 0
    distilled = sum(
        1
        for i in distilled_ids(memory)
        if (e := res.get(i)) is not None and not state.on_probation(e)
    )
    return {
        "name": memory.namespace,
        "policy": memory.policy.name,
        "max_bytes": memory.max_bytes,
        "used_bytes": int(res.used),
        "entries": n,
        "decisions": memory.store.decision_count(memory.namespace),
        "step": memory.step,
        "states": {"injectable": n - held - distilled, "probation": held, "distilled": distilled},
        "kinds": dict(Counter(e.kind for e in ents)),
        "origins": dict(Counter(e.origin for e in ents)),
    }


def newest_first(
    memory: Memory, before: int | None = None, window: int = 512
) -> Iterator[Decision]:
    """The namespace's decisions newest first (``seq < before``), read from the end of the log
    in windows of ``window`` seqs growing 4x: a first page costs a few hundred rows, not the
    whole log (seqs are the store's, shared by its namespaces)."""
    hi = memory.store.last_seq() if before is None else before - 1
    while hi > 0:
        lo = max(0, hi - window)
        rows = memory.store.decisions(memory.namespace, since=lo)
        for d in reversed(rows):
            if d.seq <= hi:
                yield d
        hi = lo
        window *= 4


class UsageReplay:
    """Bytes used over the decision log, replayed once and then only from where it stopped.

    Each entry's bytes are set by admit/distill/replace/update rows and dropped by evict and
    forget rows; a log shortened by retention starts from what it still held when first read.
    """

    def __init__(self) -> None:
        self.seq = 0
        self.used = 0
        self.sizes: dict[str, int] = {}
        self.series: list[tuple[int, float, int]] = []

    def advance(self, memory: Memory) -> None:
        """Fold in the rows after the last one seen."""
        for d in memory.store.decisions(memory.namespace, since=self.seq):
            self.seq = d.seq
            if d.action in ("admit", "distill", "replace", "update"):
                self.used += d.bytes - self.sizes.get(d.entry_id, 0)
                self.sizes[d.entry_id] = d.bytes
            elif d.action in ("evict", "forget"):
                self.used -= self.sizes.pop(d.entry_id, 0)
            else:
                continue
            self.series.append((d.seq, d.at, max(self.used, 0)))


def usage(memory: Memory, replay: UsageReplay | None = None, points: int = PLOT_POINTS) -> Json:
    """Bytes used over the decision log (``replay``, advanced to now), at most ``points``
    points; the last point is the resident bytes now (the replay is a picture, the store is
    the account)."""
    replay = replay or UsageReplay()
    replay.advance(memory)
    series = replay.series
    if len(series) > points:
        idx = np.linspace(0, len(series) - 1, points).round().astype(int)
        series = [series[i] for i in sorted(set(idx.tolist()))]
    now = {"seq": memory.store.last_seq(), "used_bytes": int(_res(memory).used)}
    return {
        "max_bytes": memory.max_bytes,
        "points": [{"seq": q, "at": a, "used_bytes": u} for q, a, u in series],
        "now": now,
    }


def _text_test(q: str | None) -> Callable[[Entry], bool] | None:
    """``q`` as a case-insensitive substring of the text, the id or the origin detail."""
    if not q:
        return None
    needle = q.casefold()
    return lambda e: (
        needle in e.text.casefold() or needle in e.id or needle in e.origin_detail.casefold()
    )


def _meta_test(meta_key: str | None, meta_value: str | None) -> Callable[[Entry], bool] | None:
    """``meta_key`` present (no ``meta_value``) or its value, compared as text."""
    if not meta_key:
        return None
    if meta_value is None or meta_value == "":
        return lambda e: meta_key in e.meta
    return lambda e: str(e.meta.get(meta_key, "\0")) == meta_value


def _entry_tests(distilled: set[str], f: EntryFilter) -> list[Callable[[Entry], bool]]:
    """The tests of :func:`list_entries`'s filters, one per filter given."""
    kind, origin, st = f.kind, f.origin, f.state
    tests: list[Callable[[Entry], bool] | None] = [
        (lambda e: e.kind == kind) if kind else None,
        (lambda e: e.origin == origin) if origin else None,
        (lambda e: state_of(e, distilled) == st) if st is not None else None,
        _meta_test(f.meta_key, f.meta_value),
        _text_test(f.q),
    ]
    return [t for t in tests if t is not None]


def list_entries(
    memory: Memory,
    f: EntryFilter | None = None,
    newest_first: bool = True,
    *,
    offset: int = 0,
    limit: int = 50,
) -> dict[str, Any]:
    """One page of resident entries matching every filter of ``f`` given (:class:`EntryFilter`
    says what each matches; None: every resident entry).

    Raises
    ------
    InvalidInput
        An unknown ``f.state``.
    """
    f = f or EntryFilter()
    state = f.state
    if state is not None and state not in STATES:
        raise InvalidInput(f"state must be one of {', '.join(STATES)}, got {state!r}")
    res = _res(memory)
    distilled = distilled_ids(memory) if state is not None and state != "probation" else set()
    tests = _entry_tests(distilled, f)
    ents: Iterable[Entry] = reversed(res.entries) if newest_first else res.entries
    sel = [e for e in ents if all(t(e) for t in tests)]
    page = sel[offset : offset + limit]
    if state is None and page:
        distilled = distilled_ids(memory)
    return {
        "total": len(sel),
        "offset": offset,
        "next_offset": offset + limit if offset + limit < len(sel) else None,
        "rows": [row(e, distilled) for e in page],
    }


def trust_of(e: Entry) -> dict[str, Any]:
    """An entry's trust marks in words: probation, its evidence and what it still lacks."""
    t = state.of(e)
    on = t.probation is not None
    lacks: list[str] = []
    if on:
        lacks.append("a verified outcome (a passed contained trial or verified feedback)")
        if t.held_for is None:
            lacks.append("a second authenticated writer of the same content (agreement)")
    return {
        "state": "probation" if on else "released" if t.corroborated is not None else "trusted",
        "probation": t.probation,
        "held_for": t.held_for,
        "taint": t.taint,
        "corroborated": list(t.corroborated or []),
        "vouched_by": list(t.vouched_by or []),
        "derived_from": t.derived_from,
        "claimed_origin": t.claimed_origin,
        "signed": e.origin in ("self", "peer"),
        "lacks": lacks,
    }


def value_terms(memory: Memory, entry_id: str) -> dict[str, Any]:
    """CURATOR's ρ and its parts, and TokenWorth's worth, for one resident entry, where the
    namespace's policy has them (empty ``terms`` otherwise, with the reason in ``note``).

    The terms are computed over the whole resident set (ρ's redundancy and propensity read
    every entry): about a second at 10^5 entries, so the page asks for them apart.

    Raises
    ------
    EntryNotFound
        Not resident in this namespace.
    """
    res = _res(memory)
    i = res.index.get(entry_id)
    if i is None:
        raise EntryNotFound("no such entry")
    out: dict[str, Any] = {"policy": memory.policy.name, "terms": {}, "note": ""}
    ents = list(res.entries)
    pol: Any = memory.policy
    notes = []
    try:
        t = pol.estimator("rho").terms(ents, res.matrix)
        out["terms"].update({k: _num(float(np.asarray(v)[i])) for k, v in t._asdict().items()})
    except (AttributeError, MemcuratorError, KeyError) as e:
        notes.append(f"no ρ under this policy ({type(e).__name__})")
    try:
        w = pol.estimator("worth").q(ents)
        out["terms"]["worth"] = _num(float(np.asarray(w)[i]))
    except (AttributeError, MemcuratorError, KeyError):
        notes.append("no learned worth under this policy")
    out["note"] = "; ".join(notes)
    return out


def decision_out(d: Decision) -> dict[str, Any]:
    """One decision row, with the action in words and the glossary term that explains it."""
    return {
        "seq": d.seq,
        "step": d.step,
        "action": d.action,
        "entry_id": d.entry_id,
        "score": _num(d.score),
        "reason": d.reason,
        "policy": d.policy,
        "bytes": d.bytes,
        "at": d.at,
        "words": ACTION_WORDS.get(d.action, d.action),
        "term": ACTION_TERMS.get(d.action),
    }


#: words in the reason of the rows a task's outcome writes about an entry: a verified success
#: that corroborated it, a contained trial, a feedback-quarantine eviction or verdict
FEEDBACK_MARKS = ("verified outcome", "contained trial", "feedback quarantine")
#: what the page says about the rows the log does not keep
NO_FEEDBACK_ROWS = (
    "The decision log keeps no row per feedback call: the counts are the entry's own (uses, "
    "successes with reward >= 0.5, failures), and the rows listed are those an outcome wrote "
    "(a verified outcome, a contained trial, a feedback-quarantine eviction), each with its "
    "step and reward."
)


def feedback_history(e: Entry | None, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The feedback an entry got: its counts (resident entries only) and the rows of its
    decisions an outcome wrote (``rows``: :func:`decision_out` of the entry's decisions)."""
    logged = [
        {"seq": r["seq"], "step": r["step"], "action": r["action"], "reward": r["score"],
         "reason": r["reason"]}
        for r in rows
        if r["action"] == "trial" or any(m in r["reason"] for m in FEEDBACK_MARKS)
    ]  # fmt: skip
    out: dict[str, Any] = {"logged": logged, "note": NO_FEEDBACK_ROWS}
    if e is not None:
        out["counts"] = {
            "uses": e.uses,
            "successes": e.successes,
            "failures": e.failures,
            "last_used_step": e.last_used_step,
        }
        out["stats"] = {k: _num(float(v)) for k, v in e.stats.items()}
    return out


def entry_detail(memory: Memory, entry_id: str) -> dict[str, Any]:
    """One entry: text, provenance, trust, the feedback it got (:func:`feedback_history`) and
    every decision that touched it (its value terms are :func:`value_terms`). The log is read
    back from its end to the row that made the entry.

    An entry no longer resident (evicted, forgotten) is shown by its decisions alone.

    Raises
    ------
    EntryNotFound
        Neither resident nor in this namespace's decision log (another namespace's id too).
    """
    res = _res(memory)
    rows = []
    for d in newest_first(memory):  # back to the row that made the entry (or the log's start)
        if d.entry_id == entry_id:
            rows.append(decision_out(d))
            if d.action in FIRST_ACTIONS:
                break
    rows.reverse()
    e = res.get(entry_id)
    if e is None and not rows:
        raise EntryNotFound("no such entry")
    out: dict[str, Any] = {
        "id": entry_id,
        "resident": e is not None,
        "decisions": rows,
        "feedback": feedback_history(e, rows),
    }
    if e is not None:
        distilled = {entry_id} if any(r["action"] == "distill" for r in rows) else set()
        out["entry"] = {
            **row(e, distilled),
            "text": e.text,
            "raw_bytes": e.raw_bytes,
            "reinforcement": e.reinforcement,
            "successes": e.successes,
            "failures": e.failures,
            "last_used_step": e.last_used_step,
            "meta": dict(e.meta),
        }
        out["trust"] = trust_of(e)
    return out


def entry_origins(memory: Memory) -> dict[str, str]:
    """``id -> origin`` of the resident entries (the log's rows carry no origin)."""
    return {e.id: e.origin for e in _res(memory).entries}


def _log_rows(memory: Memory, action: str | None, before: int | None) -> Iterable[Decision]:
    """The namespace's decisions newest first (``seq < before``), of ``action`` if given."""
    if not action:
        return newest_first(memory, before)
    # the store filters by action itself: read only those rows
    rows: Iterable[Decision] = reversed(
        memory.store.decisions(memory.namespace, since=0, action=action)
    )
    if before is not None:
        rows = (d for d in rows if d.seq < before)
    return rows


def _origin_test(memory: Memory, origin: str | None) -> Callable[[Decision], bool] | None:
    """A row's entry is of ``origin``: the resident entry's, else the one its reason names."""
    if not origin:
        return None
    origins = entry_origins(memory)

    def test(d: Decision) -> bool:
        o = origins.get(d.entry_id)
        return f"origin {origin}" in d.reason if o is None else o == origin

    return test


def _peer_test(memory: Memory, peer: str | None) -> Callable[[Decision], bool] | None:
    """A row is about ``peer``: its resident entry came from that peer (``origin_detail``),
    else its reason names the peer (``peer X`` / ``peer:X``, as receive and the gate write)."""
    if not peer:
        return None
    senders = {e.id: e.origin_detail for e in _res(memory).entries if e.origin == "peer"}

    def test(d: Decision) -> bool:
        sender = senders.get(d.entry_id)
        if sender is not None:
            return sender == peer
        return f"peer {peer}" in d.reason or f"peer:{peer}" in d.reason

    return test


def _decision_tests(memory: Memory, f: DecisionFilter) -> list[Callable[[Decision], bool]]:
    """The tests of :func:`decisions_page`'s filters (but ``action``), one per filter given."""
    needle = f.reason.casefold() if f.reason else None
    entry_id = f.entry_id
    tests: list[Callable[[Decision], bool] | None] = [
        (lambda d: d.entry_id == entry_id) if entry_id else None,
        (lambda d: needle in d.reason.casefold()) if needle else None,
        _origin_test(memory, f.origin),
        _peer_test(memory, f.peer),
    ]
    return [t for t in tests if t is not None]


def decisions_page(
    memory: Memory, f: DecisionFilter | None = None, before: int | None = None, limit: int = 100
) -> dict[str, Any]:
    """The decision log newest first, filtered by ``f`` (:class:`DecisionFilter` says what
    each filter matches; None: every row); ``before`` is the seq to page back from."""
    f = f or DecisionFilter()
    tests = _decision_tests(memory, f)
    out: list[dict[str, Any]] = []
    nxt = None
    for d in _log_rows(memory, f.action, before):
        if not all(t(d) for t in tests):
            continue
        if len(out) == limit:
            nxt = out[-1]["seq"]
            break
        out.append(decision_out(d))
    return {"decisions": out, "next_before": nxt}


def recall_explained(memory: Memory, probe: RecallProbe, where: Where = None) -> dict[str, Any]:
    """The playground's recall of ``probe`` (``where``: its conditions, compiled by the route),
    changing nothing (``observe=False``), with each candidate's dense (cosine) and lexical (BM25
    over the best) scores beside the policy's ranked score, what each filter left out of the
    resident set, and what the model would be given (``inject``:
    :func:`memcurator.service.inspector.inject.would_inject`)."""
    from memcurator.lifecycle.query import query_vector
    from memcurator.lifecycle.recall import other_users_rows
    from memcurator.service.inspector.inject import would_inject

    query, k, user = probe.query, probe.k, probe.user
    r = memory.recall(query, k=k, where=where, user=user, min_score=probe.min_score, observe=False)
    res = _res(memory)
    _, e_q = query_vector(memory.embedder, query)
    cols = res.entries.columns
    n = len(res.entries)
    probation = int((cols.column("on_probation") > 0).sum()) if n else 0
    content_free = int((cols.column("content_free") > 0).sum()) if n else 0
    other_user = int(other_users_rows(res, user).sum()) if n else 0
    removed_where = None
    if where is not None:
        removed_where = sum(1 for e in res.entries if not state.on_probation(e) and not where(e))
    bm = res.bm25.scores(query) if n else None
    top = float(np.max(bm)) if bm is not None and len(bm) and np.max(bm) > 0 else 0.0
    cands = []
    for rank, (eid, score) in enumerate(zip(r.ids, r.scores, strict=True), 1):
        i = res.index.get(eid)
        e = res.entries[i]
        dense = float(res.matrix[i] @ e_q)
        lex = float(bm[i]) / top if bm is not None and top > 0 else 0.0
        cands.append(
            {
                "rank": rank,
                **row(e, set()),
                "score": _num(float(score)),
                "dense": _num(dense),
                "lexical": _num(lex),
            }
        )
    return {
        "query": query,
        "k": k,
        "resident": n,
        "removed": {
            "on probation": probation,
            "content-free": content_free,
            "another user's": other_user,
            "where filter": removed_where,
        },
        "candidates": cands,
        "inject": would_inject(memory, probe, r, where),
    }


def probation_queue(memory: Memory, *, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """Resident entries on trust probation, newest first, each with its evidence."""
    res = _res(memory)
    held = [e for e in reversed(res.entries) if state.on_probation(e)]
    page = held[offset : offset + limit]
    return {
        "total": len(held),
        "offset": offset,
        "next_offset": offset + limit if offset + limit < len(held) else None,
        "rows": [
            {
                **row(e, set()),
                "successes": e.successes,
                "failures": e.failures,
                "trust": trust_of(e),
            }
            for e in page
        ],
    }


def settle(memory: Memory, entry_id: str, by: str, reason: str, action: str) -> dict[str, Any]:
    """The probation queue's two actions on one entry, by a person's decision: ``"release"``
    it (logged ``corroborate`` with the key's name ``by`` and ``reason``; recall may inject it
    from then on) or ``"forget"`` it (``by`` and ``reason`` in the tombstone).

    Raises
    ------
    EntryNotFound
        Not resident in this namespace.
    InvalidInput
        Not on probation, or an empty reason.
    KeyError
        An ``action`` not in :data:`SETTLE` (the routes name only those).
    """
    act = SETTLE[action]
    if not reason.strip():
        raise InvalidInput(f"a {action} needs a reason in words")
    return act(memory, entry_id, by, reason)


def _held(res: Any, entry_id: str) -> Entry:
    """The resident entry ``entry_id`` of ``res``, on probation."""
    e = res.get(entry_id)
    if e is None:
        raise EntryNotFound("no such entry")
    if not state.on_probation(e):
        raise InvalidInput(f"entry {entry_id!r} is not on probation")
    return e


def _release(memory: Memory, entry_id: str, by: str, reason: str) -> dict[str, Any]:
    ctx = memory._ctx
    with ctx.transaction():
        m = _held(ctx.res, entry_id)
        held = str(state.of(m).probation)
        why = f"released by admin key {by!r} at step {ctx.step}: {reason.strip()}"
        corroborate(state.of(m), why)
        ctx.log(
            ctx.step,
            "corroborate",
            m.id,
            float("nan"),
            f"off probation: released by admin key {by!r} in the inspector ({reason.strip()}); "
            f"was held for: {held}",
            m.bytes,
        )
        ctx.store.update(m)
        ctx.res.touch([m.id])
    return {"id": entry_id, "released": True, "by": by}


def _forget(memory: Memory, entry_id: str, by: str, reason: str) -> dict[str, Any]:
    _held(_res(memory), entry_id)
    f = memory.forget(
        entry_id, reason=f"forgotten by admin key {by!r} from the probation queue: {reason}"
    )
    return {"id": entry_id, "forgotten": list(f.ids), "freed": f.freed}


#: the probation queue's actions (:func:`settle`), by the name in their route
SETTLE: dict[str, Callable[[Memory, str, str, str], dict[str, Any]]] = {
    "release": _release,
    "forget": _forget,
}


def peer_traffic(memory: Memory, hub: Any, group: str) -> dict[str, Any]:
    """Per peer: what it pushed through the hub (messages, entries, bytes on the wire,
    notices), what this namespace admitted, held on probation or refused from it, and its
    reputation here (:func:`add_reputation`)."""
    peers: dict[str, dict[str, Any]] = {}

    def of(p: str) -> dict[str, Any]:
        return peers.setdefault(
            p,
            {
                "peer": p,
                "messages": 0,
                "entries": 0,
                "wire_bytes": 0,
                "notices": 0,
                "resident": 0,
                "probation": 0,
                "refused": 0,
            },
        )

    msgs = hub.messages(group)  # one transaction: a consistent copy of the group's log
    for msg in msgs:
        p = of(msg.sender)
        p["messages"] += 1
        p["entries"] += len(msg.entries)
        p["notices"] += len(msg.notices)
        p["wire_bytes"] += sum(
            len(str(x.get("text", "")).encode()) + len(str(x.get("raw_text") or "").encode())
            for x in msg.entries
        )
    for e in _res(memory).entries:
        if e.origin == "peer" and e.origin_detail:
            p = of(e.origin_detail)
            p["resident"] += 1
            p["probation"] += int(state.on_probation(e))
    for d in memory.store.decisions(memory.namespace, action="reject"):
        for p in peers.values():
            if f"peer {p['peer']}" in d.reason or f"peer:{p['peer']}" in d.reason:
                p["refused"] += 1
    note = add_reputation(memory, peers, of)
    return {"peers": sorted(peers.values(), key=lambda p: p["peer"]), "reputation_note": note}


def add_reputation(
    memory: Memory, peers: dict[str, dict[str, Any]], of: Callable[[str], dict[str, Any]]
) -> str:
    """Put each peer's reputation here beside its traffic (``reputation``: None where the
    namespace's policy keeps none), adding the peers known to the reputation alone (``of``
    makes a peer's row). Returns what the page says about it.

    The reputation is CURATOR's Beta posterior over the outcomes of a peer's entries used here
    (:class:`memcurator.trust.reputation.PeerReputation`): ``weight`` is what the peer's
    advertised numbers count for (0 when quarantined), ``mean`` and ``lcb`` the posterior's.
    """
    from memcurator.lifecycle.exchange import reputation

    rep = reputation(memory._ctx)  # the policy's own object, read only
    if rep is None:
        for p in peers.values():
            p["reputation"] = None
        return f"policy {memory.policy.name!r} keeps no peer reputation"
    st = rep.state()
    for name in [*st["counts"], *st["quarantine"]]:
        of(name)
    for name, p in peers.items():
        post = rep.posterior(name)
        p["reputation"] = {
            "weight": _num(rep.reputation(name)),
            "mean": _num(post.mean),
            "lcb": _num(post.lcb),
            "outcomes": post.n,
            "quarantined": rep.quarantine_reason(name),
        }
    return (
        "reputation: the Beta posterior over the outcomes of each peer's entries used here; "
        f"weight (the posterior's {rep.weight}, conf {rep.conf:g}) is what its advertised "
        f"numbers count for here, 0 when quarantined ({rep.on} below {rep.threshold:g} after "
        f"{rep.min_outcomes} outcomes)"
    )
