"""Per-entry inputs of a score as cached numeric columns (issue 9, section 5).

ρ's per-entry inputs (bytes, abstraction gain, helpfulness counts, text statistics, provenance
features; CURATOR Eq. 1-4) depend on each entry alone, while its propensity and harm terms move
with every query. A Keep pass over n residents used to rebuild the former with Python work per
entry (about 250 ms at 100k). :class:`EntryColumns` keeps them as float64 columns aligned with a
resident list and recomputes only the rows of entries that changed; the resident set
(:class:`memcurator.lifecycle.resident.ResidentSet`) tells it what changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import numpy as np

from memcurator.trust import state
from memcurator.trust.provenance import injectable, priced_channel
from memcurator.types import Entry
from memcurator.value.provenance import text_stats

Extract = Callable[[Entry], float]


def _extractor(key: Hashable) -> Extract:
    if isinstance(key, tuple) and len(key) == 3 and key[0] == "stat":
        name, dflt = str(key[1]), float(key[2])
        return lambda m: m.stats.get(name, dflt)
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "of" and callable(key[1]):
        return key[1]  # ("of", f): any per-entry number f(entry), cached like the others
    if key == "bytes":
        return lambda m: m.bytes
    if key == "raw_bytes":
        return lambda m: m.raw_bytes
    if key in ("external", "peer"):  # the channel it is priced at: released = corroborated
        return lambda m: priced_channel(state.of(m), m.origin) == key
    if key == "content_free":
        return lambda m: not np.any(m.embedding)
    if key == "user_scoped":
        return lambda m: state.user_of(m) is not None
    if key == "on_probation":
        return lambda m: not injectable(m)
    if key == "log_reinforcement":
        return lambda m: math.log1p(max(m.reinforcement, 0))
    if key in ("specificity", "instruction_likeness"):
        j = 0 if key == "specificity" else 1
        return lambda m: text_stats(m)[j]
    raise KeyError(f"no entry column {key!r}")


class EntryColumns:
    """Numeric fields of a list of entries as float64 columns, computed once per entry.

    A column is built on first request (one pass over the entries) and then kept aligned with
    the list by :meth:`appended`, :meth:`removed` and :meth:`invalidate`, which recompute only
    the rows concerned. Without those calls (a list nobody maintains) it is a one-shot
    computation.

    Parameters
    ----------
    entries : list of Entry
        The list the columns follow (by reference; the caller keeps them in step).

    Notes
    -----
    Keys: ``"bytes"``, ``"raw_bytes"``, ``"external"``, ``"peer"`` (0/1), ``"content_free"``
    (1 for a zero embedding), ``"user_scoped"`` (1 when ``trust.user`` is set),
    ``"on_probation"`` (1 when :func:`memcurator.trust.provenance.injectable` is False),
    ``"log_reinforcement"`` (log1p of the reinforcement count), ``"specificity"``,
    ``"instruction_likeness"`` (the text statistics of
    :func:`memcurator.value.provenance.text_stats`) and
    ``("stat", name, repr(default))``, ``entry.stats.get(name, default)`` (:meth:`stat`), and
    ``("of", f)``: ``f(entry)`` for any module-level function ``f`` (one key per function).

    Examples
    --------
    >>> import numpy as np
    >>> from memcurator.types import Entry
    >>> es = [Entry(id=str(i), namespace="n", kind="raw", text="t", bytes=10 * (i + 1),
    ...             raw_bytes=10, embedding=np.zeros(2, np.float32)) for i in range(3)]
    >>> cols = EntryColumns(es)
    >>> cols.column("bytes").tolist()
    [10.0, 20.0, 30.0]
    >>> es[1].bytes = 5; cols.invalidate([1]); cols.column("bytes").tolist()
    [10.0, 5.0, 30.0]
    """

    def __init__(self, entries: list[Entry]):
        self._entries = entries
        self._cols: dict[Hashable, np.ndarray] = {}
        self._fns: dict[Hashable, Extract] = {}
        self._n = len(entries)
        self._dirty: set[int] = set()

    def column(self, key: Hashable) -> np.ndarray:
        """The column ``key``, shape (n,), float64; a copy the caller may modify."""
        self._refresh()
        col = self._cols.get(key)
        if col is None:
            fn = self._fns[key] = _extractor(key)
            n = len(self._entries)
            col = np.empty(max(16, 2 * n))
            col[:n] = np.fromiter((fn(m) for m in self._entries), dtype=np.float64, count=n)
            self._cols[key] = col
        return col[: self._n].copy()

    def stat(self, name: str, default: float = 0.0) -> np.ndarray:
        """``[m.stats.get(name, default) for m in entries]``, shape (n,)."""
        # the default as text: a NaN default must give the same key every time
        return self.column(("stat", name, repr(float(default))))

    def __len__(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------------ maintenance
    def appended(self) -> None:
        """One entry was appended to the list: compute its row of every cached column."""
        n = len(self._entries)
        if n != self._n + 1:
            self.reset()
            return
        m = self._entries[-1]
        for key, col in list(self._cols.items()):
            if n > col.shape[0]:
                grown = np.empty(2 * n)
                grown[: n - 1] = col[: n - 1]
                self._cols[key] = col = grown
            col[n - 1] = self._fns[key](m)
        self._n = n

    def removed(self, rows: Iterable[int]) -> None:
        """The entries at ``rows`` are about to leave the list (positions before the removal;
        call this before removing them)."""
        rs = sorted(set(rows))
        if not rs:
            return
        if self._dirty:
            self._refresh_rows()
        n, first = self._n, rs[0]
        live = np.ones(n - first, dtype=bool)
        live[np.asarray(rs) - first] = False
        n_live = n - len(rs)
        for col in self._cols.values():
            col[first:n_live] = col[first:n][live]
        self._n = n_live

    def invalidate(self, rows: Iterable[int]) -> None:
        """The entries at ``rows`` changed in place: recompute their rows on next use."""
        self._dirty.update(rows)

    def reset(self) -> None:
        """Forget every column (the list was replaced or reordered)."""
        self._cols.clear()
        self._fns.clear()
        self._dirty.clear()
        self._n = len(self._entries)

    def _refresh(self) -> None:
        if self._n != len(self._entries):
            self.reset()
        elif self._dirty:
            self._refresh_rows()

    def _refresh_rows(self) -> None:
        rows = [r for r in self._dirty if 0 <= r < self._n]
        self._dirty.clear()
        for key, col in self._cols.items():
            fn = self._fns[key]
            for r in rows:
                col[r] = fn(self._entries[r])


def entry_columns(entries: list[Entry]) -> EntryColumns:
    """The columns maintained with ``entries`` (a resident list), or one-shot ones."""
    cols = getattr(entries, "columns", None)
    return cols if isinstance(cols, EntryColumns) else EntryColumns(entries)


def stat_column(stats: Any, name: str, default: float = 0.0) -> np.ndarray:
    """``stats.get(name, default)`` over a list of stats dicts, or a column of an
    :class:`EntryColumns`; shape (n,)."""
    if isinstance(stats, EntryColumns):
        return stats.stat(name, default)
    n = len(stats)
    return np.fromiter((st.get(name, default) for st in stats), dtype=np.float64, count=n)


__all__ = ["EntryColumns", "entry_columns", "stat_column"]
