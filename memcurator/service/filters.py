"""``where`` filters as data: a list of ``{field, op, value}`` conditions, all of which must hold.

A client cannot send code; it sends conditions over an entry's fields, which
:func:`compile_where` checks and turns into the predicate :meth:`memcurator.Memory.recall`
takes (and the entries listing applies). Nothing is evaluated: each op is a Python function
chosen from a fixed table.

Fields: ``kind``, ``origin``, ``origin_detail``, ``user`` (the entry's user scope),
``created_step``, ``last_used_step``, ``uses``, ``successes``, ``failures``, ``reinforcement``,
``bytes``, and ``meta.<key>`` (one metadata key). Ops: ``eq``, ``ne``, ``in``, ``not_in``,
``lt``, ``le``, ``gt``, ``ge`` (numbers), ``contains`` (substring of a string, or member of a
list) and ``exists`` (value true or false). A field the entry lacks satisfies only ``ne``,
``not_in`` and ``exists: false``; an order op on a non-number is false, never an error.

Examples
--------
>>> from types import SimpleNamespace as C
>>> from memcurator.types import Entry
>>> import numpy as np
>>> e = Entry("e1", "ns", "insight", "t", 10, 10, np.zeros(2), meta={"family": "f3"})
>>> pred = compile_where([C(field="kind", op="eq", value="insight"),
...                       C(field="meta.family", op="in", value=["f1", "f3"])])
>>> pred(e), compile_where([C(field="uses", op="gt", value=0)])(e)
(True, False)
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any

from memcurator.errors import InvalidInput
from memcurator.limits import MAX_INT, MIN_INT
from memcurator.trust import state
from memcurator.types import Entry

_ENTRY_FIELDS: dict[str, Callable[[Entry], Any]] = {
    "kind": lambda e: e.kind,
    "origin": lambda e: e.origin,
    "origin_detail": lambda e: e.origin_detail,
    "user": lambda e: _MISSING if (u := state.user_of(e)) is None else u,
    "created_step": lambda e: e.created_step,
    "last_used_step": lambda e: e.last_used_step,
    "uses": lambda e: e.uses,
    "successes": lambda e: e.successes,
    "failures": lambda e: e.failures,
    "reinforcement": lambda e: e.reinforcement,
    "bytes": lambda e: e.bytes,
}
#: the fields a condition may name besides ``meta.<key>``
FIELDS: tuple[str, ...] = tuple(_ENTRY_FIELDS)
OPS: tuple[str, ...] = ("eq", "ne", "in", "not_in", "lt", "le", "gt", "ge", "contains", "exists")
MAX_CONDITIONS = 32
MAX_LIST = 256
_META_KEY = re.compile(r"^meta\.([A-Za-z0-9_][A-Za-z0-9_.:-]{0,63})$")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


def _num(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _order(f: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: _num(a) and f(a, b)


def _contains(a: Any, b: Any) -> bool:
    if isinstance(a, str):
        return isinstance(b, str) and b in a
    if isinstance(a, list):
        return b in a
    return False


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a is not _MISSING and a == b,
    "ne": lambda a, b: a is _MISSING or a != b,
    "in": lambda a, b: a is not _MISSING and a in b,
    "not_in": lambda a, b: a is _MISSING or a not in b,
    "lt": _order(lambda a, b: a < b),
    "le": _order(lambda a, b: a <= b),
    "gt": _order(lambda a, b: a > b),
    "ge": _order(lambda a, b: a >= b),
    "contains": lambda a, b: a is not _MISSING and _contains(a, b),
    "exists": lambda a, b: (a is not _MISSING) == b,
}


def _finite(v: Any) -> bool:
    """A number a condition may compare with: a 64-bit integer or a finite float (a larger
    integer cannot even become a float)."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return MIN_INT <= int(v) <= MAX_INT
    return _num(v) and math.isfinite(float(v))


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | bool) or _finite(v)


def check_condition(field: str, op: str, value: Any) -> None:
    """Raise :class:`InvalidInput` unless ``(field, op, value)`` is a valid condition."""
    if field not in _ENTRY_FIELDS and not _META_KEY.match(str(field)):
        raise InvalidInput(
            f"where: unknown field {field!r}; use one of {sorted(FIELDS)} or meta.<key>"
        )
    if op not in _OPS:
        raise InvalidInput(f"where: unknown op {op!r}; use one of {list(OPS)}")
    if op in ("in", "not_in"):
        if not isinstance(value, list) or len(value) > MAX_LIST or not all(map(_scalar, value)):
            raise InvalidInput(
                f"where: {op} takes a list of at most {MAX_LIST} strings, numbers, booleans or "
                f"nulls, got {value!r}"
            )
    elif op in ("lt", "le", "gt", "ge"):
        if not _finite(value):
            raise InvalidInput(
                f"where: {op} takes a finite number (integers within 64 bits), got {value!r}"
            )
    elif op == "exists":
        if not isinstance(value, bool):
            raise InvalidInput(f"where: exists takes true or false, got {value!r}")
    elif not _scalar(value):
        raise InvalidInput(f"where: {op} takes a string, number, boolean or null, got {value!r}")


def _meta_getter(key: str) -> Callable[[Entry], Any]:
    def get(e: Entry) -> Any:
        return e.meta.get(key, _MISSING)

    return get


def compile_where(conditions: Sequence[Any] | None) -> Callable[[Entry], bool] | None:
    """The predicate that holds when every condition holds (None for no conditions).

    Parameters
    ----------
    conditions : sequence of objects with ``field``, ``op`` and ``value``
        At most :data:`MAX_CONDITIONS`.

    Raises
    ------
    InvalidInput
        Too many conditions, or one that :func:`check_condition` refuses.
    """
    if not conditions:
        return None
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidInput(f"where: at most {MAX_CONDITIONS} conditions, got {len(conditions)}")
    tests: list[tuple[Callable[[Entry], Any], Callable[[Any, Any], bool], Any]] = []
    for c in conditions:
        check_condition(c.field, c.op, c.value)
        m = _META_KEY.match(c.field)
        get = _meta_getter(m.group(1)) if m is not None else _ENTRY_FIELDS[c.field]
        tests.append((get, _OPS[c.op], c.value))

    def where(e: Entry) -> bool:
        return all(op(get(e), value) for get, op, value in tests)

    return where


__all__ = ["FIELDS", "MAX_CONDITIONS", "OPS", "check_condition", "compile_where"]
