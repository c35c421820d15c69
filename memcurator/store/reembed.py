"""Re-embed a namespace after an embedder change: explicit, resumable, nothing lost if it stops.

The namespace records which embedder made its vectors (:func:`memcurator.memory.embedder_identity`)
and :class:`~memcurator.Memory` refuses to open it with another. :func:`reembed` walks the
entries in insertion order, in batches; each batch (new vectors, adjusted bytes and a progress
mark ``reembedding:<target>@<rowid>`` in the namespace's embedder field) commits as one
transaction, so a process stopped at any point leaves every entry with its text and a valid
vector, and the next call resumes after the last committed batch. The namespace takes the new
identity only when every entry has been re-embedded. Texts, counts, statistics and the decision
log are not touched; one ``update`` decision records the change.

The same path converts a namespace to another stored precision (``vector_dtype``,
:mod:`memcurator.store.vectors`): each vector is recomputed from its text and stored in the
target precision (so converting back to float32 restores exact vectors), its row records that
precision, and its bytes change by the difference in stored vector bytes. While it runs the
progress mark names the target as ``<identity>#<dtype>``; the namespace takes the new precision
with its identity, when every entry is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.retrieve.hybrid import recall_text
from memcurator.store.base import REEMBED_PENDING, Store, VectorRow
from memcurator.store.vectors import check_dtype, vector_nbytes

#: Prefix of the embedder field of a namespace whose re-embedding has not finished.
PENDING = REEMBED_PENDING


class ReembedResult(NamedTuple):
    """Outcome of :func:`reembed`: entries re-embedded by this call, in all, whether the
    namespace now carries the new identity, and, when finished, by how many bytes the entries
    now exceed the namespace's budget (0 within it; a larger precision grows every entry, and
    the next handle's Keep pass evicts down to the budget, each eviction logged)."""

    reembedded: int
    total: int
    finished: bool
    over_budget: int = 0


def _mark(target: str, rowid: int) -> str:
    return f"{PENDING}{target}@{rowid}"


def _target(identity: str, dtype: str, current: str) -> str:
    """What the progress mark names: the identity, plus ``#dtype`` when the precision changes
    (so a mark written before precisions existed still reads as it did)."""
    return identity if dtype == current else f"{identity}#{dtype}"


def reembed(
    store: Store,
    namespace: str,
    embed: Callable[[str], np.ndarray],
    identity: str,
    dim: int,
    *,
    batch: int = 256,
    max_batches: int | None = None,
    vector_dtype: str | None = None,
) -> ReembedResult:
    """Re-embed every entry of ``namespace`` with ``embed``; resumable (see the module notes).

    Parameters
    ----------
    store : Store
        Any store backend (:class:`~memcurator.store.base.Store`).
    namespace : str
    embed : callable (str) -> ndarray of shape (dim,)
        Applied to each entry's recall text (its ``Task:`` line, or the whole text).
    identity : str
        The identity the namespace records when done (``embedder_identity(embedder)``).
    dim : int
        The new embedding dimension; each entry's bytes change by the difference in stored
        vector bytes (:func:`~memcurator.store.vectors.vector_nbytes`), its other accounted
        bytes stay.
    batch : int, default 256
        Entries per transaction.
    max_batches : int, optional
        Stop after this many batches (the run stays resumable); None runs to the end.
    vector_dtype : {"float32", "float16", "int8"}, optional
        Stored precision of the namespace when done; None keeps its precision (or resumes a
        conversion in progress).

    Returns
    -------
    ReembedResult

    Raises
    ------
    InvalidInput
        ``batch`` not positive, an unknown ``vector_dtype``, a vector of the wrong shape or
        with NaN, or a namespace that is being re-embedded to another identity or precision.
    NamespaceNotFound
    """
    if isinstance(batch, bool) or int(batch) < 1:
        raise InvalidInput(f"batch must be a positive integer, got {batch!r}")
    if vector_dtype is not None:
        check_dtype(vector_dtype)
    info = store.namespace(namespace)
    pending = info.embedder.startswith(PENDING)
    if pending and vector_dtype is None:  # resume a conversion in progress
        vector_dtype = info.embedder.rpartition("@")[0].partition("#")[2] or None
    dtype = info.vector_dtype if vector_dtype is None else vector_dtype
    if info.embedder == identity and info.dim == dim and info.vector_dtype == dtype:
        return ReembedResult(0, store.count(namespace), True)
    want = _target(identity, dtype, info.vector_dtype)
    after = 0
    if pending:
        target, _, pos = info.embedder[len(PENDING) :].rpartition("@")
        if target != want:
            raise InvalidInput(
                f"namespace {namespace!r} is being re-embedded to {target!r}; finish that first"
            )
        after = int(pos)
    new_vec = vector_nbytes(dim, dtype)
    done = 0
    batches = 0
    # Learned state in the old embedding space (CURATOR's query sketch, TokenWorth's features)
    # cannot be carried into another space: it restarts, in the first batch's transaction,
    # logged; the step clock and every entry's own statistics (uses, outcomes, q) stay. A
    # change of precision only keeps the space and the state.
    space_changed = not pending and (info.embedder != identity or info.dim != dim)

    def convert(rows: list[VectorRow]) -> None:
        for r in rows:
            e = np.asarray(embed(recall_text(r.text)), dtype=np.float32)
            if e.shape != (dim,) or not np.all(np.isfinite(e)):
                raise InvalidInput(f"embedder gave shape {e.shape} or NaN for entry {r.id!r}")
            nb = r.bytes - r.vector_bytes + new_vec
            store.set_embedding(namespace, r.id, e, max(nb, 1), dtype)

    while max_batches is None or batches < max_batches:
        with store.transaction():
            if space_changed:
                _restart_state(store, namespace, f"{info.embedder} (dim {info.dim})")
                space_changed = False
            rows = store.vector_rows(namespace, after=after, limit=int(batch))
            convert(rows)
            done += len(rows)
            if rows:
                after = rows[-1].pos
                store.set_embedder(namespace, _mark(want, after), info.dim)
            else:
                # rows rewritten behind the mark in another precision (a handle of an older
                # memcurator that does not refuse writes during a conversion) are converted too
                stragglers = store.vector_rows(namespace, other_than=(dtype, new_vec))
                convert(stragglers)
                done += len(stragglers)
                st = store.load_state(namespace)
                old = store.namespace(namespace)
                store.set_embedder(namespace, identity, dim, dtype)
                prec = (
                    f" (vectors {old.vector_dtype} -> {dtype})" if old.vector_dtype != dtype else ""
                )
                store.log(
                    namespace,
                    step=st[1] if st else 0,
                    action="update",
                    entry_id="",
                    reason=f"re-embedded {store.count(namespace)} entries: {info.embedder} -> "
                    f"{identity}{prec}",
                )
                budget = store.namespace(namespace).max_bytes
                over = 0 if budget is None else max(0, store.used_bytes(namespace) - budget)
                return ReembedResult(done, store.count(namespace), True, over)
        batches += 1
    return ReembedResult(done, store.count(namespace), False)


def _restart_state(store: Store, namespace: str, old_space: str) -> None:
    """Drop the namespace's saved policy state (keeping its step), logged: it was learned in
    ``old_space`` and a handle with the new embedder could not load it."""
    st = store.load_state(namespace)
    if st is None or not st[2]:
        return
    store.save_state(namespace, "", st[1], {})
    store.log(
        namespace,
        step=st[1],
        action="update",
        entry_id="",
        reason=f"re-embedding: policy {st[0]!r}'s learned state was learned in the embedding "
        f"space of {old_space} and restarts; the step and every entry's statistics stay",
    )


__all__ = ["PENDING", "ReembedResult", "reembed"]
