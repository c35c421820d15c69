"""The one accessor of an entry's trust state (:class:`memcurator.types.TrustState`).

Every reader and writer of probation, taint, provenance and user scope goes through here: the
state lives in the store's own columns (schema v6; before, in underscore keys of ``meta``), and
``meta`` is the user's alone. The key names below are the state's keys (``state[PROBATION]``);
a key not named here (``"_" + name``) is kept in the state's generic ``extra`` column.

References
----------
CURATOR, Sec. III-C (the provenance prior of an entry follows its origin and sources).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcurator.errors import InvalidInput
from memcurator.types import (
    RESERVED_PREFIX,
    TRUST_KEYS,
    TrustState,
    is_internal_key,
    split_meta,
)

DERIVED_FROM = "_derived_from"
TAINT = "_taint"
PROBATION = "_probation"
CORROBORATED = "_corroborated"
#: authenticated principals that wrote the same content (``origin:origin_detail``)
VOUCHED = "_vouched_by"
#: on probation for what the content says (an instruction in an own record's tool output),
#: not for its source: more writers or agreement do not release it, a verified outcome does
HELD_FOR = "_held_for"
#: the origin claimed when a check downgraded it
CLAIMED_ORIGIN = "claimed_origin"
#: the user an entry is scoped to; personal data of that user (never shared)
USER = "_user"
PERSONAL = "_personal"


def of(entry: Any) -> TrustState:
    """The trust state of ``entry`` (an :class:`~memcurator.types.Entry`, an admission, or
    anything with a ``trust`` attribute)."""
    t = entry.trust
    if not isinstance(t, TrustState):
        raise InvalidInput(f"trust state must be a TrustState, got {type(t).__name__}")
    return t


def on_probation(entry: Any) -> bool:
    """Whether ``entry`` is on probation (kept, not injected)."""
    return PROBATION in of(entry)


def user_of(entry: Any) -> str | None:
    """The user ``entry`` is scoped to (None: shared by every user of the namespace)."""
    return of(entry).user


def is_personal(entry: Any) -> bool:
    """Whether ``entry`` is personal data (never shared to peers)."""
    return bool(of(entry).personal)


def scope(user: str | None, personal: bool) -> TrustState:
    """The state of a new entry scoped to ``user`` (``personal``: its personal data).

    Raises
    ------
    InvalidInput
        ``personal`` without a ``user``.
    """
    if personal and user is None:
        raise InvalidInput("personal=True needs the user the data belongs to (user=...)")
    return TrustState(user=user, personal=True if personal else None)


def sized_meta(meta: Mapping[str, Any], trust: TrustState) -> dict[str, Any]:
    """The metadata ``b(m)`` counts: the user's ``meta`` and the trust state in its flat form
    (every stored byte counts against the budget, as before the state had its own columns).

    Examples
    --------
    >>> sized_meta({"family": "f"}, TrustState(taint="peer"))
    {'family': 'f', '_taint': 'peer'}
    """
    return {**meta, **trust.legacy()}


def check_user_meta(meta: Mapping[str, Any]) -> None:
    """Refuse user metadata that names trust state.

    Raises
    ------
    InvalidInput
        A top-level key starting with ``"_"`` (memcurator's reserved prefix) or naming trust
        state (``claimed_origin``). Nested keys are the user's data whatever their name.

    Examples
    --------
    >>> check_user_meta({"family": "f", "x": {"_probation": 1}})
    >>> check_user_meta({"_probation": "x"})
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: meta key '_probation' is reserved: keys starting with '_' ...
    """
    bad = sorted(k for k in meta if isinstance(k, str) and is_internal_key(k))
    if bad:
        raise InvalidInput(
            f"meta key {bad[0]!r} is reserved: keys starting with {RESERVED_PREFIX!r} and "
            f"{sorted(k for k in TRUST_KEYS if not k.startswith(RESERVED_PREFIX))} are "
            "memcurator's own trust state, which user metadata can never set; rename the key"
        )


__all__ = [
    "CLAIMED_ORIGIN",
    "CORROBORATED",
    "DERIVED_FROM",
    "HELD_FOR",
    "PERSONAL",
    "PROBATION",
    "RESERVED_PREFIX",
    "TAINT",
    "USER",
    "VOUCHED",
    "TrustState",
    "check_user_meta",
    "is_personal",
    "of",
    "on_probation",
    "scope",
    "sized_meta",
    "split_meta",
    "user_of",
]
