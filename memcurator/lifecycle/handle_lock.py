"""One lock per handle: :class:`~memcurator.Memory` is safe to share between threads.

A handle's state (the resident set's entry list, matrix, BM25 index and byte account, the
policy's learned state, the step clock) is changed by every write, feedback, forget and Keep
pass and read by every recall. Without a lock a recall ranking over the matrix while another
thread appends a row reads a list and a matrix of different lengths (``IndexError``,
``ValueError`` of shapes). :func:`thread_safe` makes each public method and property of a class
hold the handle's re-entrant lock for its whole call, so calls through one handle take turns
(a method that calls another, or a ``recall(where=...)`` callback that reads the memory, runs
in the thread that holds it). Handles on one store each have their own lock and run in
parallel as far as the store lets them (SQLite: one writer per file; PostgreSQL: one writer per
namespace).

An adapter whose one operation is several calls through a handle holds :func:`handle_lock`
around them (the LangGraph store does). A :class:`~memcurator.trust.auth.KeyRing` shared by
handles has a lock of its own. What is not covered: objects a method returned (entries are
copies; a :class:`RecallResult` is the caller's) and attributes reached around the facade
(``mem.policy``, ``mem.store``): those are the caller's to share.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Dunder methods that read or change the handle's state and take the lock like public ones.
_DUNDERS = ("__len__", "__repr__", "__enter__", "__exit__", "__iter__", "__contains__")


def _locked(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._handle_lock:
            return fn(self, *args, **kwargs)

    return call


def thread_safe(cls: type[T]) -> type[T]:
    """Class decorator: every public method and property of ``cls`` (and its state-reading
    dunders) holds one re-entrant lock per instance, created before ``__init__`` runs.

    Parameters
    ----------
    cls : type
        The class (its own attributes are wrapped; inherited ones are not).

    Returns
    -------
    type
        ``cls``, changed in place.

    Examples
    --------
    >>> @thread_safe
    ... class Counter:
    ...     def __init__(self):
    ...         self.n = 0
    ...     def bump(self):
    ...         self.n += 1
    ...         return self.n
    >>> import threading
    >>> c = Counter()
    >>> ts = [threading.Thread(target=lambda: [c.bump() for _ in range(1000)]) for _ in range(4)]
    >>> for t in ts: t.start()
    >>> for t in ts: t.join()
    >>> c.n
    4000
    """
    init = cls.__dict__.get("__init__")
    # the class's own attributes and those it inherits (a base's views are the handle's too)
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's own methods are not the handle's
        found.update(vars(klass))
    for name, attr in found.items():
        if name == "__init__" or (name.startswith("_") and name not in _DUNDERS):
            continue
        if isinstance(attr, property):
            setattr(
                cls,
                name,
                property(
                    None if attr.fget is None else _locked(attr.fget),
                    None if attr.fset is None else _locked(attr.fset),
                    None if attr.fdel is None else _locked(attr.fdel),
                    attr.__doc__,
                ),
            )
        elif callable(attr) and not isinstance(attr, (staticmethod, classmethod, type)):
            setattr(cls, name, _locked(attr))

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        self._handle_lock = threading.RLock()
        with self._handle_lock:
            if init is not None:
                init(self, *args, **kwargs)
            else:
                super(cls, self).__init__(*args, **kwargs)  # type: ignore[misc]

    if init is not None:
        functools.update_wrapper(__init__, init)
    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


def handle_lock(handle: Any) -> threading.RLock:
    """The re-entrant lock of a :func:`thread_safe` instance (a :class:`~memcurator.Memory`).

    An adapter that makes several calls through one handle and needs them to be one step (the
    LangGraph store's batch: list the items, replace one, read back what was written) holds
    this lock around them, so other users of the handle, in the adapter or not, cannot evict or
    replace an entry between its calls.

    Raises
    ------
    InvalidInput
        ``handle`` is not an instance of a :func:`thread_safe` class.

    Examples
    --------
    >>> from memcurator import Memory
    >>> mem = Memory(max_bytes=None)
    >>> with handle_lock(mem):  # re-entrant: the handle's own calls take it again
    ...     len(mem)
    0
    """
    lock = getattr(handle, "_handle_lock", None)
    if lock is None:
        from memcurator.errors import InvalidInput

        raise InvalidInput(f"{type(handle).__name__} has no handle lock (not @thread_safe)")
    return lock  # type: ignore[no-any-return]


__all__ = ["handle_lock", "thread_safe"]
