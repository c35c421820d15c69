"""Checks every write path applies before anything is stored: text, metadata, statistics,
origin detail, the embedding, and the de-duplication key."""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from typing import Any

import numpy as np

from memcurator import limits
from memcurator.embed.text import has_content, normalize
from memcurator.errors import InvalidInput
from memcurator.retrieve.hybrid import recall_text
from memcurator.trust import state
from memcurator.types import TrustState

#: Longest accepted ``origin_detail`` (peer id, tool, solver name), UTF-8 bytes.
MAX_DETAIL_BYTES = 256


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
) -> tuple[dict[str, Any], TrustState]:
    """A deep copy of ``meta`` as the store gives it back (JSON types: a tuple comes back a
    list) and the scope of the new entry's trust state, or :class:`InvalidInput` for metadata
    that is not JSON-serialisable, nested deeper than :data:`memcurator.limits.MAX_META_DEPTH`,
    holding an integer outside the 64-bit range, larger than ``max_text_bytes`` or
    :data:`memcurator.limits.MAX_META_BYTES` as JSON (scope included), naming trust state
    (a top-level key starting with ``_``, or ``claimed_origin``:
    :func:`memcurator.trust.state.check_user_meta`), or a bad ``user``
    (:func:`memcurator.limits.check_user`).

    Deep, so that a caller's later edit of a list or dict inside ``meta`` cannot reach the
    resident entry (the next write-back would store it while ``b(m)`` still counts the
    metadata as written).

    ``user`` is kept as the entry's ``trust.user`` (recall then returns the entry only to that
    user); ``personal`` as ``trust.personal`` (never shared to peers); personal data needs a
    user it belongs to. A plain ``"user"`` key in a caller's metadata means nothing to recall.
    """
    if meta is not None and not isinstance(meta, dict):
        raise InvalidInput(f"meta must be a dict, got {type(meta).__name__}")
    meta = dict(meta or {})
    bad = [k for k in meta if not isinstance(k, str)]
    if bad:
        # JSON keys are strings: {1: 2} would come back from the store as {"1": 2}
        raise InvalidInput(f"meta keys must be strings, got {bad[0]!r}")
    state.check_user_meta(meta)
    scope = state.scope(None if user is None else limits.check_user(user), personal)
    # depth, 64-bit integers, finite numbers, JSON types and size: memcurator.limits
    js = limits.meta_json(state.sized_meta(meta, scope), max_text_bytes)
    return {k: v for k, v in json.loads(js).items() if k in meta}, scope


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


__all__ = [
    "MAX_DETAIL_BYTES",
    "check_detail",
    "check_meta",
    "check_stats",
    "check_text",
    "dedup_key",
    "embed_checked",
    "sha1",
]
