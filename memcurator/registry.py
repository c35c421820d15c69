"""One registry helper for every extension point: policies' components, embedders, executors.

A :class:`Registry` maps a name to a factory, given either as a callable or as a lazy
``"module:attribute"`` string that is imported only when the name is first created (mem0's lazy
imports, STYLE.md rule 8). Every registry has the same ``create(name, **kwargs)`` signature, and an
unknown name raises :class:`~memcurator.errors.UnknownName` listing ``sorted(names)``, so the
message never goes stale. A registry given an entry-point ``group`` also holds what installed
distributions declare in that group (read once, when a name is first looked up or the names are
listed), so a third-party package adds a plug-in by declaring it in its own ``pyproject.toml``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib import import_module, metadata
from typing import Any, Generic, TypeVar

from memcurator.errors import InvalidInput, UnknownName

T = TypeVar("T")


class Registry(Generic[T]):
    """Name → factory, with lazy imports and one ``create()`` signature.

    Parameters
    ----------
    kind : str
        What the registry holds, for messages (``"executor"``, ``"keep component"``, ...).
    entries : dict of str to (callable or str), optional
        Initial registrations; a string is ``"module:attribute"``.
    group : str, optional
        Entry-point group whose entries (``name = "module:attribute"``) are added, lazily, on
        the first lookup of a name or listing of the names. A name registered in code
        (``entries`` or :meth:`register`) keeps its factory over an entry point of that name.

    Examples
    --------
    >>> reg = Registry("number", {"fraction": "fractions:Fraction"})
    >>> reg.create("fraction", numerator=3, denominator=4)
    Fraction(3, 4)
    >>> "fraction" in reg, sorted(reg)
    (True, ['fraction'])
    >>> reg.create("nope")
    Traceback (most recent call last):
    ...
    memcurator.errors.UnknownName: unknown number 'nope'; known: ['fraction']
    """

    def __init__(
        self,
        kind: str,
        entries: dict[str, Callable[..., T] | str] | None = None,
        *,
        group: str | None = None,
    ):
        self.kind = kind
        self.group = group
        self._entries: dict[str, Callable[..., T] | str] = dict(entries or {})
        self._discovered = group is None

    def _discover(self) -> None:
        """Add the entry points of :attr:`group` (once; names registered in code win)."""
        if self._discovered or self.group is None:
            return
        self._discovered = True
        for ep in metadata.entry_points(group=self.group):
            self._entries.setdefault(ep.name, f"{ep.module}:{ep.attr}")

    def register(self, name: str, factory: Callable[..., T] | str) -> None:
        """Add or replace ``name``.

        Raises
        ------
        InvalidInput
            ``name`` is empty or not a string, or ``factory`` is neither callable nor a
            ``"module:attribute"`` string.
        """
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"{self.kind} name must be a non-empty string, got {name!r}")
        if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
            raise InvalidInput(
                f"{self.kind} {name!r}: factory must be callable or 'module:attribute'"
            )
        self._entries[name] = factory

    def factory(self, name: str) -> Callable[..., T]:
        """The factory of ``name``, importing its module when it was given lazily.

        Raises
        ------
        UnknownName
            ``name`` is not registered; the message lists the known names.
        """
        try:
            f = self[name]
        except (KeyError, TypeError):
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {sorted(self)}") from None
        if isinstance(f, str):
            module, attr = f.split(":", 1)
            f = getattr(import_module(module), attr)
            self._entries[name] = f
        return f  # type: ignore[return-value]

    def create(self, name: str, /, **kwargs: Any) -> T:
        """Build ``name`` with ``kwargs`` as its constructor arguments."""
        return self.factory(name)(**kwargs)

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self._discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._discover()
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        self._discover()
        return len(self._entries)

    def __getitem__(self, name: str) -> Callable[..., T] | str:
        if name not in self._entries:
            self._discover()
        return self._entries[name]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self)})"


__all__ = ["Registry"]
