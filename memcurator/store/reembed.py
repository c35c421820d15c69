"""Re-embed a namespace after an embedder change: explicit, resumable, nothing lost if it stops.

The namespace records which embedder made its vectors (:func:`memcurator.memory.embedder_identity`)
and :class:`~memcurator.Memory` refuses to open it with another. :func:`reembed` walks the
entries in insertion order, in batches; each batch (new vectors, adjusted bytes and a progress
mark ``reembedding:<target>@<rowid>`` in the namespace's embedder field) commits as one
transaction, so a process stopped at any point leaves every entry with its text and a valid
vector, and the next call resumes after the last committed batch. The namespace takes the new
identity only when every entry has been re-embedded. Texts, counts, statistics and the decision
log are not touched; one ``update`` decision records the change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.retrieve.hybrid import recall_text
from memcurator.store.sqlite import SQLiteStore

#: Prefix of the embedder field of a namespace whose re-embedding has not finished.
PENDING = "reembedding:"


class ReembedResult(NamedTuple):
    """Outcome of :func:`reembed`: entries re-embedded by this call, in all, and whether the
    namespace now carries the new identity."""

    reembedded: int
    total: int
    finished: bool


def _mark(target: str, rowid: int) -> str:
    return f"{PENDING}{target}@{rowid}"


def reembed(
    store: SQLiteStore,
    namespace: str,
    embed: Callable[[str], np.ndarray],
    identity: str,
    dim: int,
    *,
    batch: int = 256,
    max_batches: int | None = None,
) -> ReembedResult:
    """Re-embed every entry of ``namespace`` with ``embed``; resumable (see the module notes).

    Parameters
    ----------
    store : SQLiteStore
    namespace : str
    embed : callable (str) -> ndarray of shape (dim,)
        Applied to each entry's recall text (its ``Task:`` line, or the whole text).
    identity : str
        The identity the namespace records when done (``embedder_identity(embedder)``).
    dim : int
        The new embedding dimension; each entry's bytes change by the difference in
        embedding bytes (4 bytes a dimension), its other accounted bytes stay.
    batch : int, default 256
        Entries per transaction.
    max_batches : int, optional
        Stop after this many batches (the run stays resumable); None runs to the end.

    Returns
    -------
    ReembedResult

    Raises
    ------
    InvalidInput
        ``batch`` not positive, a vector of the wrong shape or with NaN, or a namespace that is
        being re-embedded to another identity.
    NamespaceNotFound
    """
    if isinstance(batch, bool) or int(batch) < 1:
        raise InvalidInput(f"batch must be a positive integer, got {batch!r}")
    info = store.namespace(namespace)
    if info.embedder == identity and info.dim == dim:
        return ReembedResult(0, store.count(namespace), True)
    after = 0
    if info.embedder.startswith(PENDING):
        target, _, pos = info.embedder[len(PENDING) :].rpartition("@")
        if target != identity:
            raise InvalidInput(
                f"namespace {namespace!r} is being re-embedded to {target!r}; finish that first"
            )
        after = int(pos)
    done = 0
    batches = 0
    conn = store._conn
    while max_batches is None or batches < max_batches:
        with store.transaction():
            rows = conn.execute(
                "SELECT rowid, id, text, bytes, embedding FROM entries WHERE namespace=? AND "
                "rowid>? ORDER BY rowid LIMIT ?",
                (namespace, after, int(batch)),
            ).fetchall()
            for rowid, eid, text, nbytes, old in rows:
                e = np.asarray(embed(recall_text(text)), dtype=np.float32)
                if e.shape != (dim,) or not np.all(np.isfinite(e)):
                    raise InvalidInput(f"embedder gave shape {e.shape} or NaN for entry {eid!r}")
                nb = int(nbytes) - len(old) + int(e.nbytes)
                store.set_embedding(namespace, eid, e, max(nb, 1))
                after = int(rowid)
            done += len(rows)
            if rows:
                conn.execute(
                    "UPDATE namespaces SET embedder=? WHERE name=?",
                    (_mark(identity, after), namespace),
                )
            else:
                st = store.load_state(namespace)
                store.set_embedder(namespace, identity, dim)
                store.log(
                    namespace,
                    step=st[1] if st else 0,
                    action="update",
                    entry_id="",
                    reason=f"re-embedded {store.count(namespace)} entries: {info.embedder} -> "
                    f"{identity}",
                )
                return ReembedResult(done, store.count(namespace), True)
        batches += 1
    return ReembedResult(done, store.count(namespace), False)


__all__ = ["PENDING", "ReembedResult", "reembed"]
