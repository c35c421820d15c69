"""The resident set: a namespace's entries in memory, their embedding matrix and byte account.

It is a cache of the store, never a second source of truth: :meth:`ResidentSet.sync` brings it
up to date whenever the store's change token changed (a commit or rollback from this handle,
another handle on the same connection, or another process). Another handle's commits are
applied from the namespace's change feed (:meth:`memcurator.store.base.Store.changes_since`):
only the entries changed since this set last looked are read, so catching up costs what the
change costs, not what the namespace holds. The whole namespace is read again only when the
feed cannot say (trimmed, the namespace deleted) and after a rollback of this set's own
transaction (:meth:`ResidentSet.invalidate`), so a failed transaction leaves no trace here.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np

from memcurator.retrieve import BM25Index
from memcurator.retrieve.hybrid import recall_text
from memcurator.retrieve.literals import literal_values
from memcurator.store.base import Store
from memcurator.types import Entry
from memcurator.value.columns import EntryColumns

#: Cosine on recall text at or above which two entries with the same literals are versions of
#: one request: ``Memory``'s ``same_request`` default, which Keep applies too.
SAME_REQUEST = 0.99


@functools.lru_cache(maxsize=1 << 14)
def _request_key(line: str) -> tuple[str, tuple[str, ...]]:
    """(recall text folded to one case and single spaces, its literals)."""
    return " ".join(line.split()).casefold(), literal_values(line)


def why_same_request(a: str, b: str, cosine: float, threshold: float | None) -> str | None:
    """Why entries with texts ``a`` and ``b`` hold the same request, or None if they do not.

    Two entries hold the same request when their recall texts (``Task:`` lines, see
    :func:`~memcurator.retrieve.hybrid.recall_text`) are equal up to case and whitespace, or
    when their cosine is at least ``threshold`` (the memory's same-request threshold) **and**
    their literals are the same (:func:`~memcurator.retrieve.literals.literal_values`:
    numbers, dates, quoted strings, identifiers). "user 17" and "user 18" differ in a literal:
    they are different facts however close their embeddings are.

    Parameters
    ----------
    a, b : str
        The entries' texts.
    cosine : float
        Cosine of their embeddings (taken of the recall texts).
    threshold : float or None
        Same-request cosine; None leaves only the equal-task-line rule.

    Returns
    -------
    str or None
        A short reason for the decision log.

    Examples
    --------
    >>> why_same_request("Task: Get user 18\\nAction: x", "Task: get  USER 18", 0.97, 0.99)
    'task line equal up to case and whitespace'
    >>> why_same_request("Task: email of user 18", "Task: email of user 19", 0.995, 0.99) is None
    True
    >>> why_same_request("Task: email of user 18!", "Task: email of user 18", 0.995, 0.99)
    'cosine 0.995 >= same_request=0.99 and the same literals'
    """
    ka, kb = _request_key(recall_text(a)), _request_key(recall_text(b))
    if ka[0] == kb[0]:
        return "task line equal up to case and whitespace"
    if threshold is not None and cosine >= threshold and ka[1] == kb[1]:
        return f"cosine {cosine:.3f} >= same_request={threshold:g} and the same literals"
    return None


class ResidentEntries(list[Entry]):
    """The resident entries in store order, with their score inputs as cached columns
    (:class:`~memcurator.value.columns.EntryColumns`) that the resident set keeps in step."""

    def __init__(self, entries: list[Entry]):
        super().__init__(entries)
        self.columns = EntryColumns(self)
        #: bumped by every change of the resident matrix (add, remove, edit, reload)
        self.generation = 0
        #: ``(v, generation, E @ v)`` left by the last recall for admission (see
        #: :meth:`memcurator.policy.base.Policy.admission_sketch`); valid while ``generation``
        #: and ``v`` are unchanged
        self.sketch_dots: tuple[np.ndarray, int, np.ndarray] | None = None

    def cached_dots(self, v: np.ndarray) -> np.ndarray | None:
        """``E @ v`` over the current resident matrix if the last recall left it, else None."""
        c = self.sketch_dots
        if c is None or c[1] != self.generation or c[0].dtype != v.dtype:
            return None
        return c[2] if np.array_equal(c[0], v) else None


class ResidentSet:
    """Entries of one namespace, with the derived structures recall and Keep read.

    Parameters
    ----------
    store : Store
    namespace : str
    dim : int
        Embedding dimension d.
    delta : float or None
        Cosine floor δ of the near-duplicate graph (the keep component's
        ``redundancy_delta``); the graph is maintained only when it is set.

    Attributes
    ----------
    same_request : float or None
        The memory's same-request cosine (default :data:`SAME_REQUEST`); the graph links two
        entries only if :func:`why_same_request` says they hold one request. Set it before the
        graph's first use (a Keep pass under pressure).
    entries : list of Entry
        In store order; the objects are private to this set (callers get copies).
    used : int
        ``sum(b(m))``, bytes.
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        dim: int,
        delta: float | None,
        derive: Any = None,  # a lifecycle.derive.VectorDeriver
    ):
        self.store = store
        self.namespace = namespace
        self.dim = dim
        self.delta = delta
        # exact vectors of a derived precision (memcurator.lifecycle.derive), applied on load
        self.derive = derive
        self.same_request: float | None = SAME_REQUEST
        #: bytes the namespace stores besides its entries (a text dictionary), in ``used``
        self.fixed = 0
        self._token: Any = None
        #: the namespace's change sequence number this set reflects (None: reload on sync)
        self._seq: int | None = None
        #: full reloads and feed catch-ups so far (what :meth:`sync` did; for tests, benches)
        self.reloads = 0
        self.catchups = 0
        self.reload()

    # ------------------------------------------------------------------ cache
    def reload(self) -> None:
        """Read the namespace's entries from the store and rebuild everything derived.

        The change token is read first: a commit landing between the two reads leaves an
        older token, so the next :meth:`sync` reloads again (read after, it would hide it).
        """
        token = self.store.change_token()
        seq = self.store.change_seq(self.namespace)  # before the rows: a change between
        loaded = self.store.entries(self.namespace)  # is read again
        self.entries = ResidentEntries(loaded if self.derive is None else self.derive(loaded))
        self._seq = seq
        self.reloads += 1
        # an empty set starts its (empty) graph now and links each add; a loaded one builds it
        # on first use
        self._near: dict[str, dict[str, float]] | None = None if self.entries else {}
        self.changed()
        self._token = token
        # ids added or given feedback since the last victims pass; None: look at everything
        self._changed_ids: set[str] | None = None

    @property
    def near(self) -> dict[str, dict[str, float]]:
        """Versions of one request: ``near[a][b]`` is the cosine of a and b when it is >= δ and
        :func:`why_same_request` says a and b hold the same request. Symmetric.

        Built on first use (a Keep pass with a redundancy test), O(n²·d) once, then kept up to
        date by every add, remove and edit; opening a store does not pay for it. Empty when δ
        is not set.
        """
        if self._near is None:
            self._near = {}
            if self.delta is not None and self.entries:
                M = self.matrix
                for lo in range(0, len(self.entries), 1024):
                    S = M[lo : lo + 1024] @ M.T
                    for r, c in zip(*np.nonzero(S >= self.delta), strict=True):
                        i, j = sorted((lo + int(r), int(c)))
                        # a pair listed from either end links both ends (a float32 block
                        # product is not bitwise symmetric)
                        if i != j:
                            self._pair(self._near, self.entries[i], self.entries[j], float(S[r, c]))
        return self._near

    def current(self) -> bool:
        """True when nothing committed or rolled back since this set last looked."""
        return bool(self.store.change_token() == self._token)

    def _pair(self, near: dict[str, dict[str, float]], a: Entry, b: Entry, cosine: float) -> None:
        """Link a and b in ``near`` (both ways) if they hold the same request."""
        if why_same_request(a.text, b.text, cosine, self.same_request) is not None:
            near.setdefault(a.id, {})[b.id] = cosine
            near.setdefault(b.id, {})[a.id] = cosine

    def sync(self) -> bool:
        """Catch up if anything committed or rolled back since we last looked; True if it did
        (the caller then re-reads what else the namespace owns: budget, step, policy state).

        Applies the namespace's change feed since the sequence number this set reflects: each
        changed id is read once (:meth:`~memcurator.store.base.Store.get_many`) and replaces,
        joins or leaves the set, O(changed entries · d) plus one indexed read. Reloads the
        whole namespace when the feed does not reach back (trimmed or the namespace deleted)
        or after :meth:`invalidate`.
        """
        if self.current():
            return False
        if self._seq is None:
            self.reload()
            return True
        token = self.store.change_token()  # first: a commit after it shows next time
        feed = self.store.changes_since(self.namespace, self._seq)
        if feed is None:
            self.reload()
            return True
        if feed.ids:
            self.apply(feed.ids)
        self._seq = feed.seq
        self._token = token
        self.catchups += 1
        return True

    def apply(self, ids: list[str]) -> None:
        """Bring entries ``ids`` in line with the store: a stored one replaces the resident of
        its id or joins at the end (store order: a new id's change is its insert), an absent
        one leaves. Idempotent: applying an id twice leaves the same set."""
        got = self.store.get_many(self.namespace, ids)
        if self.derive is not None:  # a derived precision: exact vectors, as on a reload
            got = self.derive(got, whole=False)
        fresh = {m.id: m for m in got}
        gone = {i for i in ids if i not in fresh and i in self.index}
        if gone:
            self.remove(gone)
        for i in ids:
            m = fresh.get(i)
            if m is None:
                continue
            row = self.index.get(i)
            if row is None:
                self.add(m)
            else:
                self.replace(row, m)

    def invalidate(self) -> None:
        """This set may hold changes a rollback undid: the next :meth:`sync` reloads it."""
        self._seq = None
        self._token = None

    def touch(self, ids: list[str]) -> None:
        """Note that the counts of ``ids`` changed (feedback): the next victims pass sees them."""
        if self._changed_ids is not None:
            self._changed_ids.update(ids)
        self.edited(ids)

    def edited(self, ids: list[str]) -> None:
        """Entries ``ids`` were changed in place (counts, reinforcement, text): their cached
        score inputs are recomputed on next use."""
        self.entries.columns.invalidate(self.index[i] for i in ids if i in self.index)

    def take_changed(self) -> list[Entry] | None:
        """The residents added or touched since the last call (None after a reload: all)."""
        ids, self._changed_ids = self._changed_ids, set()
        if ids is None:
            return None
        return [self.entries[self.index[i]] for i in ids if i in self.index]

    def mark_synced(self) -> None:
        """This handle's own commit is already reflected here: remember the token that commit
        left (:meth:`~memcurator.store.base.Store.committed_token`; a foreign commit made since
        still shows as a change)."""
        self._token = self.store.committed_token()

    def changed(self) -> None:
        """Recompute the index and byte account; drop the matrix, BM25 and column caches."""
        self._reindex()
        self.entries.columns.reset()
        self.entries.generation += 1
        self._matrix: np.ndarray | None = None  # row buffer (capacity >= n); rows [:n] are live
        self._bm25: BM25Index | None = None

    def _reindex(self) -> None:
        self.index = {m.id: i for i, m in enumerate(self.entries)}
        self.keys = {m.meta.get("text_sha1"): m.id for m in self.entries}
        self.used = sum(m.bytes for m in self.entries) + self.fixed

    @property
    def matrix(self) -> np.ndarray:
        """Embeddings of the resident entries, shape (n, d), float32, in ``entries`` order.

        A view of a row buffer kept across changes: a write appends a row (amortised O(d),
        the buffer doubles when full), an eviction compacts the buffer once per Keep pass.
        """
        n = len(self.entries)
        if self._matrix is None:
            buf = np.zeros((max(16, 2 * n), self.dim), dtype=np.float32)
            for i, m in enumerate(self.entries):
                buf[i] = m.embedding
            self._matrix = buf
        return self._matrix[:n]

    def set_row(self, row: int, embedding: np.ndarray) -> None:
        """The entry at ``row`` has a new text and ``embedding``: update the matrix row and the
        lexical index in place (O(d + its tokens))."""
        if self._matrix is not None:
            self._matrix[row] = embedding
        if self._bm25 is not None:
            self._bm25.replace_row(row, recall_text(self.entries[row].text))
        self.entries.columns.invalidate([row])
        self.entries.generation += 1

    def replace(self, row: int, m: Entry) -> None:
        """Put ``m`` in place of the entry at ``row`` (an update of the same id)."""
        old = self.entries[row]
        self.keys.pop(old.meta.get("text_sha1"), None)
        self.entries[row] = m
        self.keys[m.meta.get("text_sha1")] = m.id
        self.used += m.bytes - old.bytes
        if self._changed_ids is not None:
            self._changed_ids.add(m.id)
        self.set_row(row, m.embedding)
        self.link(m, exclude=row)

    @property
    def bm25(self) -> BM25Index:
        """A BM25 index over the resident recall texts (each entry's ``Task:`` line, or its whole
        text without one); built on first use after a reload, then kept up to date by every
        add, remove and edit (:class:`~memcurator.retrieve.bm25.BM25Index` is incremental)."""
        if self._bm25 is None:
            self._bm25 = BM25Index()
            self._bm25.fit([recall_text(m.text) for m in self.entries])
        return self._bm25

    def by_key(self, key: str) -> Entry | None:
        """The resident entry whose de-duplication key (``meta["text_sha1"]``) is ``key``."""
        eid = self.keys.get(key)
        return None if eid is None else self.get(eid)

    def get(self, entry_id: str) -> Entry | None:
        i = self.index.get(entry_id)
        return None if i is None else self.entries[i]

    @staticmethod
    def copy_of(m: Entry) -> Entry:
        """A copy a caller may edit without touching the resident entry (embedding included)."""
        c = copy.copy(m)
        c.meta = copy.deepcopy(m.meta)
        c.trust = m.trust.copy()
        c.stats = dict(m.stats)
        c.embedding = np.array(m.embedding, copy=True)
        return c

    # ------------------------------------------------------------------ changes
    def add(self, m: Entry) -> None:
        """Append one entry: O(1) index updates and one matrix row (no full rebuild)."""
        self.link(m)
        n = len(self.entries)
        if self._matrix is not None:
            if n == self._matrix.shape[0]:
                grown = np.zeros((2 * n, self.dim), dtype=np.float32)
                grown[:n] = self._matrix[:n]
                self._matrix = grown
            self._matrix[n] = m.embedding
        self.entries.append(m)
        self.entries.columns.appended()
        self.entries.generation += 1
        self.index[m.id] = n
        if self._changed_ids is not None:
            self._changed_ids.add(m.id)
        self.keys[m.meta.get("text_sha1")] = m.id
        self.used += m.bytes
        if self._bm25 is not None:
            self._bm25.append(recall_text(m.text))

    def remove(self, ids: set[str]) -> None:
        """Drop entries. Only the rows after the first removed one move (matrix rows, list
        slots, index positions); keys and the byte account change by the removed entries."""
        if self._near is not None:
            for eid in ids:
                for nb in self._near.pop(eid, {}):
                    self._near.get(nb, {}).pop(eid, None)
        rows = sorted(self.index[eid] for eid in ids if eid in self.index)
        if not rows:
            return
        n, first = len(self.entries), rows[0]
        if self._matrix is not None:
            _compact_rows(self._matrix, rows, n)
        if self._bm25 is not None:
            self._bm25.delete_rows(rows)
        self.entries.columns.removed(rows)
        self.entries.generation += 1
        for r in reversed(rows):
            m = self.entries.pop(r)
            del self.index[m.id]
            key = m.meta.get("text_sha1")
            if self.keys.get(key) == m.id:
                del self.keys[key]
            self.used -= m.bytes
        self.index.update(
            zip([m.id for m in self.entries[first:]], range(first, len(self.entries)), strict=True)
        )

    def link(self, m: Entry, exclude: int | None = None) -> None:
        """Record m's versions of one request among the residents (see :attr:`near`)."""
        if self.delta is None or self._near is None:
            return  # not built yet: the first use builds it from every resident, m included
        for nb in self._near.pop(m.id, {}):
            self._near.get(nb, {}).pop(m.id, None)
        if not self.entries:
            return
        sims = self.matrix @ m.embedding
        for jj in np.nonzero(sims >= self.delta)[0]:
            j = int(jj)
            if j == exclude or self.entries[j].id == m.id:
                continue
            self._pair(self._near, m, self.entries[j], float(sims[j]))


def _compact_rows(buf: np.ndarray, rows: list[int], n: int, chunk: int = 1024) -> None:
    """Delete ``rows`` (ascending) from ``buf[:n]`` in place, keeping the order of the others.

    Each run of live rows moves up in chunks of ``chunk`` rows, so the move reads and writes
    the tail once (a boolean-mask copy reads it twice and allocates it whole).
    """
    w = rows[0]
    bounds = [*rows[1:], n]
    for r, nxt in zip(rows, bounds, strict=True):
        s = r + 1
        while s < nxt:
            c = min(chunk, nxt - s)
            buf[w : w + c] = buf[s : s + c]
            w += c
            s += c


__all__ = ["SAME_REQUEST", "ResidentSet", "why_same_request"]
