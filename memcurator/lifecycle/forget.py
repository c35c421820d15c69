"""Forget: the one path every hard delete of an entry takes (``Memory.forget``,
``Memory.forget_all``, a peer's forget notice, ``memcurator forget``).

Each entry leaves the store and the resident set in one transaction, with a ``forget``
tombstone in the decision log and a forget notice owed to every peer it was shared with; then
the store erases the freed bytes from its persistent medium (:meth:`Store.secure_erase`), and
the result says whether that completed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memcurator.lifecycle.context import Scope
from memcurator.store.base import Store


@dataclass(frozen=True)
class ForgetResult:
    """What one forget did.

    Attributes
    ----------
    ids : list of str
        The entries deleted.
    freed : int
        Their bytes ``sum(b(m))``.
    erased : bool
        The store erased the freed bytes from its file (False: another reader's snapshot kept
        it from completing; the text is gone from every read path, and the next forget or
        :meth:`~memcurator.store.base.Store.secure_erase` retries).
    """

    ids: list[str]
    freed: int
    erased: bool


def forget(scope: Scope, ids: Iterable[str] | None, *, reason: str) -> ForgetResult:
    """Hard-delete ``ids`` (None: every resident entry) from ``scope``'s namespace.

    All or nothing: an unknown id raises and nothing is deleted. No other namespace is
    touched; the namespace, its budget, step and policy state stay.

    Raises
    ------
    EntryNotFound
        An id that is not an entry of the namespace.
    """
    with scope.transaction():
        todo = [m.id for m in scope.res.entries] if ids is None else list(dict.fromkeys(ids))
        freed = 0
        for eid in todo:
            b = scope.store.delete(scope.namespace, eid)
            freed += b
            scope.log(scope.step, "forget", eid, float("nan"), reason, b)
            scope.store.mark_forgotten(scope.namespace, eid)
        scope.res.remove(set(todo))
    return ForgetResult(todo, freed, scope.store.secure_erase())


def forget_stored(store: Store, namespace: str, entry_id: str, *, reason: str) -> ForgetResult:
    """:func:`forget` one entry of a namespace without opening a :class:`~memcurator.Memory`
    (no embedder needed): the tombstone carries the namespace's saved policy name and step.

    Raises
    ------
    NamespaceNotFound, EntryNotFound
    """
    return forget(Scope.open(store, namespace), [entry_id], reason=reason)


__all__ = ["ForgetResult", "forget", "forget_stored"]
