"""The input limits of memcurator, in one place: constants and the checks that apply them.

Every transport enforces the same numbers: the library (:class:`~memcurator.Memory`) calls these
checks where input enters (:mod:`memcurator.lifecycle.checks`,
:mod:`memcurator.lifecycle.query`, :mod:`memcurator.lifecycle.feedback`), and
``memcurator serve`` and ``memcurator mcp`` refuse the same inputs at the door with the same
constants (a 422 naming the limit). Input over a limit raises
:class:`~memcurator.errors.InvalidInput` before anything is stored, so nothing changes.

Why these limits exist
----------------------
- **Depth.** ``meta`` is stored as JSON and read back with recursive code (the JSON decoder,
  copies, pydantic's serializer); metadata nested a few hundred levels deep was accepted once
  and then made every listing, ``get`` and recall that returned the entry fail with
  ``RecursionError``. :data:`MAX_META_DEPTH` levels are far beyond any real metadata and far
  below any recursion limit.
- **Size.** Metadata is a label, not a payload: at most :data:`MAX_META_BYTES` bytes of JSON
  (and never more than the memory's ``max_text_bytes``).
- **Integers.** Numbers are stored in SQLite and PostgreSQL columns and JSON; an integer outside
  the signed 64-bit range (:data:`MIN_INT` .. :data:`MAX_INT`) cannot be stored as one.
- **Caps.** A recall returns at most :data:`MAX_RECALL_K` entries and a feedback names at most
  :data:`MAX_IDS` ids, whichever transport asks.

Examples
--------
>>> check_recall_k(3)
3
>>> check_recall_k(10**9)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memcurator.errors.InvalidInput: k must be a positive integer of at most 1000 (MAX_RECALL_K), ...
>>> deep: dict = {}
>>> node = deep
>>> for _ in range(40):
...     node["a"] = {}
...     node = node["a"]
>>> check_meta_value(deep)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memcurator.errors.InvalidInput: meta is nested deeper than 32 levels (MAX_META_DEPTH) at ...
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

from memcurator.errors import InvalidInput

#: deepest nesting of ``meta`` (a dict or list inside another counts one level; a flat dict
#: is one level deep)
MAX_META_DEPTH = 32
#: largest ``meta``, UTF-8 bytes of its JSON (the memory's ``max_text_bytes`` bounds it too)
MAX_META_BYTES = 64 * 1024
#: the signed 64-bit range: every integer memcurator stores or compares fits a BIGINT
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
#: most entries one recall returns (``k``)
MAX_RECALL_K = 1000
#: most entry ids one feedback (or record) names
MAX_IDS = 1000
#: longest ``user`` a write or recall is scoped to, characters
MAX_USER_CHARS = 256


def check_int(value: Any, what: str, lo: int = MIN_INT, hi: int = MAX_INT) -> int:
    """``value`` as an ``int`` when it is an integer (not a bool) in ``[lo, hi]``.

    Parameters
    ----------
    value : Any
        The candidate (``int`` or a NumPy integer).
    what : str
        Its name in the error message.
    lo, hi : int
        The inclusive range; by default the signed 64-bit range.

    Raises
    ------
    InvalidInput
        A bool, a non-integer (``"2"``, ``2.0``) or a value out of range.

    Examples
    --------
    >>> check_int(5, "offset", 0)
    5
    >>> check_int(2**63, "offset", 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: offset must be an integer in [0, 9223372036854775807], got ...
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInput(f"{what} must be an integer in [{lo}, {hi}], got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise InvalidInput(f"{what} must be an integer in [{lo}, {hi}], got {v}")
    return v


def check_recall_k(k: Any) -> int:
    """``k`` of a recall as an ``int`` in ``[1, MAX_RECALL_K]``.

    Parameters
    ----------
    k : int
        Any integral number (a NumPy integer too); not a bool.

    Raises
    ------
    InvalidInput
        A bool, a non-integer or out of range; the message names :data:`MAX_RECALL_K`.
    """
    integral = isinstance(k, numbers.Integral) and not isinstance(k, bool)
    if not integral or not 1 <= int(k) <= MAX_RECALL_K:
        raise InvalidInput(
            f"k must be a positive integer of at most {MAX_RECALL_K} (MAX_RECALL_K), got {k!r}"
        )
    return int(k)


def check_ids(ids: list[Any], what: str = "used") -> list[Any]:
    """``ids`` when it names at most :data:`MAX_IDS` ids.

    Raises
    ------
    InvalidInput
        More than :data:`MAX_IDS` ids.
    """
    if len(ids) > MAX_IDS:
        raise InvalidInput(f"{what} names {len(ids)} ids, over {MAX_IDS} (MAX_IDS)")
    return ids


def check_user(user: Any) -> str:
    """A ``user`` scope: a non-empty string of at most :data:`MAX_USER_CHARS` characters.

    Raises
    ------
    InvalidInput
        Not a string, empty or whitespace, or too long.
    """
    if not isinstance(user, str) or not user.strip():
        raise InvalidInput(f"user must be a non-empty string, got {user!r}")
    if len(user) > MAX_USER_CHARS:
        raise InvalidInput(
            f"user is {len(user)} characters, over {MAX_USER_CHARS} (MAX_USER_CHARS)"
        )
    return user


def _where(path: list[str]) -> str:
    shown = ".".join(path[: MAX_META_DEPTH // 8])
    return shown + ("..." if len(path) > MAX_META_DEPTH // 8 else "")


def check_meta_value(meta: Any, what: str = "meta") -> None:
    """Refuse metadata memcurator cannot store and read back: nested deeper than
    :data:`MAX_META_DEPTH`, a key that is not a string, an integer outside the 64-bit range,
    a float that is NaN or infinite, or a value that is not JSON (str, int, float, bool,
    None, list, tuple, dict).

    The walk is iterative and stops at the first level past the limit, so a structure nested
    thousands of levels deep (or one that contains itself) is refused without recursion.

    Parameters
    ----------
    meta : Any
        The metadata (usually a dict).
    what : str
        Its name in the error message.

    Raises
    ------
    InvalidInput
        The message names the limit and where it was passed (``meta.a.b...``).
    """
    stack: list[tuple[Any, int, list[str]]] = [(meta, 1, [what])]
    while stack:
        v, depth, path = stack.pop()
        if isinstance(v, dict | list | tuple):
            if depth > MAX_META_DEPTH:
                raise InvalidInput(
                    f"{what} is nested deeper than {MAX_META_DEPTH} levels (MAX_META_DEPTH) at "
                    f"{_where(path)}"
                )
            if isinstance(v, dict):
                for k, x in v.items():
                    if not isinstance(k, str):
                        raise InvalidInput(f"{what} keys must be strings, got {k!r}")
                    stack.append((x, depth + 1, path + [k]))
            else:
                stack.extend((x, depth + 1, path + [str(i)]) for i, x in enumerate(v))
        elif isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        elif isinstance(v, numbers.Integral):
            if not MIN_INT <= int(v) <= MAX_INT:
                raise InvalidInput(
                    f"{_where(path)} = {int(v)} is outside the 64-bit integer range "
                    f"[{MIN_INT}, {MAX_INT}] (MIN_INT, MAX_INT)"
                )
        elif isinstance(v, numbers.Real):
            if not math.isfinite(float(v)):
                raise InvalidInput(
                    f"{_where(path)} must be a finite number (JSON has no NaN or Infinity), "
                    f"got {v!r}"
                )
        else:
            raise InvalidInput(
                f"{_where(path)} is a {type(v).__name__}; {what} holds JSON values only "
                "(str, number, bool, None, list, dict)"
            )


def meta_json(meta: Any, max_bytes: int = MAX_META_BYTES, what: str = "meta") -> str:
    """The JSON of ``meta`` (keys sorted) after :func:`check_meta_value`, when it is at most
    ``min(max_bytes, MAX_META_BYTES)`` UTF-8 bytes.

    Parameters
    ----------
    meta : Any
        The metadata.
    max_bytes : int
        A further bound, bytes (the memory's ``max_text_bytes``).
    what : str
        Its name in the error message.

    Raises
    ------
    InvalidInput
        See :func:`check_meta_value`; or larger than the bound (the message names it).
    """
    check_meta_value(meta, what)
    try:
        js = json.dumps(meta, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise InvalidInput(f"{what} must be JSON-serialisable (finite numbers): {err}") from None
    n = len(js.encode("utf-8"))
    cap = min(max_bytes, MAX_META_BYTES)
    if n > cap:
        name = "MAX_META_BYTES" if cap == MAX_META_BYTES else "max_text_bytes"
        raise InvalidInput(
            f"{what} is {n} bytes as JSON, over {cap} ({name}); store large data elsewhere "
            "and keep a reference"
        )
    return js


__all__ = [
    "MAX_IDS",
    "MAX_INT",
    "MAX_META_BYTES",
    "MAX_META_DEPTH",
    "MAX_RECALL_K",
    "MAX_USER_CHARS",
    "MIN_INT",
    "check_ids",
    "check_int",
    "check_meta_value",
    "check_recall_k",
    "check_user",
    "meta_json",
]
