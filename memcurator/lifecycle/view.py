"""The read side of :class:`~memcurator.Memory`: what a handle's namespace holds and has
decided (entries, bytes, step, the decision log), read through the handle's context."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from memcurator.embed import Embedder
from memcurator.errors import EntryNotFound, InvalidInput
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.resident import ResidentSet
from memcurator.policy.base import Policy
from memcurator.store.base import Store
from memcurator.types import Entry


class MemoryView:
    """Read-only views of one namespace (the base of :class:`~memcurator.Memory`, which opens
    the context ``_ctx``, the ``store`` and the ``namespace``)."""

    _ctx: Context
    store: Store
    namespace: str
    policy: Policy

    @property
    def step(self) -> int:
        """The namespace's logical clock (shared by every handle on it)."""
        if self._ctx.depth == 0:
            self._ctx.sync()
        return self._ctx.step

    @step.setter
    def step(self, value: int) -> None:
        self._ctx.step = int(value)

    @property
    def max_bytes(self) -> int | None:
        """The namespace's byte budget B (None: unbounded)."""
        return self._ctx.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        self._ctx.max_bytes = value

    @property
    def energy_bytes(self) -> float:
        """Energy proxy so far: bytes embedded plus resident bytes scanned (CURATOR Eq. 6)."""
        return self._ctx.energy.total

    @energy_bytes.setter
    def energy_bytes(self, value: float) -> None:
        self._ctx.energy.total = value

    @property
    def embedder(self) -> Embedder:
        """The embedder of recall queries and new entries (stored vectors stay as they are)."""
        return self._ctx.embedder

    @embedder.setter
    def embedder(self, value: Embedder) -> None:
        self._ctx.embedder = value

    @property
    def vector_dtype(self) -> str:
        """Precision the namespace stores its vectors in."""
        return self._ctx.sizing.vector_dtype

    def entry_bytes(self, text: str, meta: dict[str, Any], embedding: np.ndarray) -> int:
        """``sizeof`` of an entry in this namespace's precision, bytes (:class:`.Sizing`)."""
        return self._ctx.sizing.entry_bytes(text, meta, embedding)

    @property
    def matrix(self) -> np.ndarray:
        """Embeddings of the resident entries, shape (n, d), float32, in ``entries()`` order."""
        self._ctx.sync()
        return self._ctx.res.matrix.copy()

    @property
    def used_bytes(self) -> int:
        """Resident bytes ``sum(b(m))``."""
        self._ctx.sync()
        return self._ctx.res.used

    def __len__(self) -> int:
        self._ctx.sync()
        return len(self._ctx.res.entries)

    def entries(self) -> list[Entry]:
        """Copies of the resident entries (editing them changes nothing stored)."""
        self._ctx.sync()
        return [ResidentSet.copy_of(m) for m in self._ctx.res.entries]

    def visible(self, *, user: str | None = None) -> list[Entry]:
        """Copies of the resident entries a recall by ``user`` may return: the candidate pool
        of a read-time curator that scans the bank instead of recalling.

        The same eligibility as recall (:func:`memcurator.lifecycle.recall.visible_rows`):
        entries on trust probation (never injected until corroborated), content-free entries
        and entries scoped to another user are left out. :meth:`entries` is the whole resident
        set (administration: listing, export).

        Examples
        --------
        >>> from memcurator import Memory
        >>> mem = Memory(policy="curator", max_bytes=None)
        >>> own = mem.write("Task: list pets\\nAction: SELECT * FROM pets;")
        >>> ext = mem.write("Task: list cars\\nAction: SELECT * FROM cars;", origin="external")
        >>> [m.id for m in mem.visible()] == [own.id], len(mem.entries())
        (True, 2)
        """
        from memcurator.lifecycle.recall import visible_rows

        self._ctx.sync()
        res = self._ctx.res
        rows = visible_rows(res, user)
        return [
            ResidentSet.copy_of(m)
            for i, m in enumerate(res.entries)
            if rows is None or bool(rows[i])
        ]

    def get(self, entry_id: str) -> Entry:
        """A copy of one resident entry; :class:`EntryNotFound` for an id that is not resident."""
        self._ctx.sync()
        m = self._ctx.res.get(entry_id)
        if m is None:
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {self.namespace!r}")
        return ResidentSet.copy_of(m)

    def decisions(self, *, since: int = 0, action: str | None = None) -> list[Any]:
        """The decision log of this namespace, oldest first: the rows after sequence number
        ``since`` (an integer >= 0; :class:`InvalidInput` otherwise)."""
        if isinstance(since, bool) or not isinstance(since, numbers.Integral) or since < 0:
            raise InvalidInput(f"since must be a sequence number, an integer >= 0, got {since!r}")
        return self.store.decisions(self.namespace, since=int(since), action=action)

    @property
    def sketch(self) -> np.ndarray:
        """The query sketch q̄ this memory advertises to peers (CURATOR Eq. 8), shape (d,)."""
        return self.policy.sketch

    def __repr__(self) -> str:
        return (
            f"Memory(namespace={self.namespace!r}, policy={self.policy!r}, "
            f"max_bytes={self.max_bytes}, entries={len(self._ctx.res.entries)})"
        )


__all__ = ["MemoryView"]
