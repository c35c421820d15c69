"""The write path: validate, reinforce an identical resident, admit through the policy's gate,
then run the Keep pass. Every admission and rejection is in the decision log with its reason."""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memcurator.embed.text import has_content, normalize
from memcurator.errors import BudgetExceeded, InvalidInput
from memcurator.retrieve.hybrid import recall_text
from memcurator.types import KINDS, ORIGINS, Entry

#: Longest accepted ``origin_detail`` (peer id, tool, solver name), UTF-8 bytes.
MAX_DETAIL_BYTES = 256

if TYPE_CHECKING:
    from memcurator.memory import Memory


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


def sha1(text: str) -> str:
    """Hex SHA-1 of the UTF-8 text (the de-duplication key stored as ``meta["text_sha1"]``)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def dedup_key(text: str) -> str:
    """The de-duplication key stored as ``meta["text_sha1"]``: SHA-1 of the text with case
    folded and every run of whitespace collapsed to one space, so that ``t``, ``t + "\\n"`` and
    ``t.upper()`` are one entry.

    Examples
    --------
    >>> dedup_key("SELECT  1;\\n") == dedup_key("select 1;")
    True
    """
    return sha1(" ".join(normalize(text).split()))


def embed_checked(embed: Any, text: str) -> np.ndarray:
    """A copy of ``embed(recall_text(text))`` as float32, or :class:`InvalidInput` for a zero,
    NaN or infinite vector.

    The embedding is taken of the entry's ``Task:`` line when it has one
    (:func:`memcurator.retrieve.hybrid.recall_text`), the whole text otherwise.
    """
    part = recall_text(text)
    what = "this text" if part == text else f"this text's task line {part[:60]!r}"
    # a copy: the entry owns its vector even if the embedder reuses an output buffer or hands
    # out an array it keeps (the next embed call would otherwise change a resident in place)
    e = np.array(embed(part), dtype=np.float32)
    if not np.all(np.isfinite(e)):
        raise InvalidInput(f"the embedder returned NaN or infinite values for {what}")
    if not np.any(e):
        raise InvalidInput(
            f"the embedder returned the zero vector for {what} (what is embedded and recalled "
            "by): it has nothing it can represent, so it could never be recalled by content"
        )
    return e


def check_text(text: Any, max_text_bytes: int) -> str:
    """The text as ``str``, or :class:`InvalidInput` for bytes that are not UTF-8, a non-string,
    lone surrogates, empty or whitespace-only text, text without a word character of any script
    (only emoji, symbols or punctuation: :func:`memcurator.embed.text.has_content`), or more
    than ``max_text_bytes`` bytes."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidInput(f"text is not valid UTF-8: {e}") from None
    if not isinstance(text, str):
        raise InvalidInput(f"text must be str or UTF-8 bytes, got {type(text).__name__}")
    try:
        nbytes = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:  # lone surrogates
        raise InvalidInput(f"text is not valid Unicode: {e}") from None
    if not text.strip():
        raise InvalidInput("text is empty or whitespace; nothing to remember")
    if not has_content(text):
        raise InvalidInput(
            f"text {text[:40]!r} has no letter or digit of any script (only symbols, emoji or "
            "punctuation); it could never be recalled by content"
        )
    if nbytes > max_text_bytes:
        raise InvalidInput(
            f"text is {nbytes} bytes, over max_text_bytes={max_text_bytes}; distill it or "
            "raise the limit"
        )
    return text


def check_stats(stats: Any) -> dict[str, float]:
    """A copy of the initial per-method statistics as ``{str: float}``, or :class:`InvalidInput`
    for a non-dict, a non-string key, or a value that is not a finite real number (a string,
    a bool, NaN)."""
    if stats is None:
        return {}
    if not isinstance(stats, dict):
        raise InvalidInput(f"stats must be a dict of str to number, got {type(stats).__name__}")
    out: dict[str, float] = {}
    for k, v in stats.items():
        if not isinstance(k, str):
            raise InvalidInput(f"stats keys must be str, got {k!r}")
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise InvalidInput(f"stats[{k!r}] must be a finite number, got {v!r}")
        out[k] = float(v)
    return out


def check_meta(
    meta: dict[str, Any] | None, max_text_bytes: int, user: str | None, personal: bool
) -> dict[str, Any]:
    """A deep copy of ``meta`` with the scope keys set, as the store gives it back (JSON types:
    a tuple comes back a list), or :class:`InvalidInput` for metadata that is not
    JSON-serialisable, larger than ``max_text_bytes`` as JSON, or a bad ``user``.

    Deep, so that a caller's later edit of a list or dict inside ``meta`` cannot reach the
    resident entry (the next write-back would store it while ``b(m)`` still counts the
    metadata as written).

    ``user`` is stored as ``meta["_user"]`` (recall then returns the entry only to that user);
    ``personal`` as ``meta["_personal"] = True`` (never shared to peers); personal data needs a
    user it belongs to. Keys starting with ``_`` are memcurator's; a plain ``"user"`` key in a
    caller's metadata means nothing to recall.
    """
    if meta is not None and not isinstance(meta, dict):
        raise InvalidInput(f"meta must be a dict, got {type(meta).__name__}")
    meta = dict(meta or {})
    bad = [k for k in meta if not isinstance(k, str)]
    if bad:
        # JSON keys are strings: {1: 2} would come back from the store as {"1": 2}
        raise InvalidInput(f"meta keys must be strings, got {bad[0]!r}")
    if user is not None:
        if not isinstance(user, str) or not user.strip():
            raise InvalidInput(f"user must be a non-empty string, got {user!r}")
        meta["_user"] = user
    if personal:
        if "_user" not in meta:
            raise InvalidInput("personal=True needs the user the data belongs to (user=...)")
        meta["_personal"] = True
    try:
        js = json.dumps(meta, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise InvalidInput(f"meta must be JSON-serialisable (finite numbers): {err}") from None
    if len(js.encode("utf-8")) > max_text_bytes:
        raise InvalidInput(
            f"meta is {len(js.encode('utf-8'))} bytes as JSON, over max_text_bytes="
            f"{max_text_bytes}; store large data elsewhere and keep a reference"
        )
    return dict(json.loads(js))


def check_detail(origin_detail: Any) -> str:
    """``origin_detail`` as given, or :class:`InvalidInput` for a non-string or one longer than
    :data:`MAX_DETAIL_BYTES` UTF-8 bytes (it is a peer id or a tool name, not a payload)."""
    if not isinstance(origin_detail, str):
        raise InvalidInput(f"origin_detail must be a str, got {type(origin_detail).__name__}")
    try:
        n = len(origin_detail.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidInput(f"origin_detail is not valid Unicode: {e}") from None
    if n > MAX_DETAIL_BYTES:
        raise InvalidInput(
            f"origin_detail is {n} bytes, over {MAX_DETAIL_BYTES}: it names a peer, tool or "
            "solver; put a payload in the text or meta"
        )
    return origin_detail


def write(
    mem: Memory,
    text: Any,
    *,
    origin: str,
    kind: str,
    origin_detail: str,
    raw_text: str | None,
    meta: dict[str, Any] | None,
    step: int | None,
    raw_bytes: int | None,
    stats: dict[str, float] | None,
    signature: Any = None,
    user: str | None = None,
    personal: bool = False,
) -> WriteResult:
    """See :meth:`memcurator.Memory.write`."""
    text = check_text(text, mem.max_text_bytes)
    if origin not in ORIGINS:
        raise InvalidInput(f"origin must be one of {list(ORIGINS)}, got {origin!r}")
    if kind not in KINDS:
        raise InvalidInput(f"kind must be raw, insight or skill, got {kind!r}")
    if step is not None and (
        isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0
    ):
        raise InvalidInput(f"step must be an integer >= 0, got {step!r}")
    detail = check_detail(origin_detail)
    meta = check_meta(meta, mem.max_text_bytes, user, personal)
    stats = check_stats(stats)
    meta["text_sha1"] = dedup_key(text)
    claimed = origin
    origin, downgrade = verify_origin(mem, text, origin, detail, kind, signature)
    if downgrade:
        meta["claimed_origin"] = claimed
    e = embed_checked(mem.embedder.embed, text)
    oversized: BudgetExceeded | None = None
    with mem._transaction():
        st = mem.step if step is None else int(step)
        res = mem._res
        e = mem.stored(e)  # in the namespace's precision, read after the sync above
        existing = res.by_key(meta["text_sha1"])
        if existing is not None:
            existing.reinforcement += 1
            res.edited([existing.id])
            mem.store.update(existing)
            mem._log(
                st,
                "reinforce",
                existing.id,
                float("nan"),
                f"same text written again by {origin}; reinforcement={existing.reinforcement}",
                existing.bytes,
            )
            return WriteResult(existing.id, True, "reinforced an identical resident entry")
        mem.energy_bytes += len(text.encode("utf-8"))
        # every stored field counts: text, meta and embedding (sizeof) and the origin detail
        b = mem.entry_bytes(text, meta, e) + len(detail.encode("utf-8"))
        b0 = mem.entry_bytes(raw_text, meta, e) if raw_text else b
        if raw_bytes is not None:
            b0 = int(raw_bytes)
        eid = mem._new_id(text)
        if downgrade:
            mem._log(st, "downgrade", eid, float("nan"), downgrade, b)
        cand = Entry(
            eid,
            mem.namespace,
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
        if mem.max_bytes is not None and b > mem.max_bytes:
            # Log and commit the rejection, then raise outside the transaction: raising inside
            # it would roll the 'reject' decision back with everything else.
            mem._log(
                st,
                "reject",
                eid,
                float("nan"),
                f"entry of {b} bytes is larger than the whole budget max_bytes={mem.max_bytes}",
                b,
            )
            oversized = BudgetExceeded(
                f"entry of {b} bytes can never fit max_bytes={mem.max_bytes}; distill it or "
                "raise the budget"
            )
        else:
            ok, score, reason = mem.policy.admit(cand, res.entries, res.matrix, st)
            if not ok:
                mem._log(st, "reject", eid, score, reason, b)
                return WriteResult(eid, False, reason, score)
            mem.store.insert(cand)
            res.add(cand)
            mem._log(st, "admit", eid, score, reason, b)
            g = mem._govern(st)
            mem._save_state()
    if oversized is not None:
        raise oversized
    return WriteResult(eid, True, reason, score, g.evicted, g.distilled)


def verify_origin(
    mem: Memory, text: str, origin: str, origin_detail: str, kind: str, signature: Any
) -> tuple[str, str]:
    """The origin the memory may act on, and the reason when a claim was downgraded.

    Without a key ring every claim is taken as given (``("origin", "")``). With one, a
    ``self`` or ``peer`` claim must carry a valid signature over
    :class:`~memcurator.trust.auth.Claim` ``(namespace, origin, origin_detail, kind, text)``;
    otherwise it is handled as ``"external"`` and the reason is returned for the decision log.

    Raises
    ------
    InvalidInput
        A signature given to a memory without a key ring.
    """
    ring = getattr(mem, "keyring", None)
    if ring is None:
        if signature is not None:
            raise InvalidInput("a signature was given but this memory has no keyring to check it")
        return origin, ""
    from memcurator.trust.auth import Claim

    v = ring.verify(Claim(mem.namespace, origin, origin_detail, kind, text), signature)
    if v.downgraded:
        return "external", v.reason
    return origin, ""


__all__ = [
    "MAX_DETAIL_BYTES",
    "WriteResult",
    "check_detail",
    "check_meta",
    "check_text",
    "dedup_key",
    "embed_checked",
    "sha1",
    "verify_origin",
    "write",
]
