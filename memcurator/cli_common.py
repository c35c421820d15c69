"""What every ``memcurator`` command shares: the error line, the exit code, the guarded app.

``cli``, ``cli_peers``, ``cli_results`` and ``cli_store`` import this module and never each
other's commands, so the command modules form no import cycle.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.text import Text

from memcurator.errors import MemcuratorError

#: error and progress lines go to standard error; tables and documents to standard output
console = Console(stderr=True)


class TableConsole(Console):
    """The console every table of the CLI is printed on: writing to a pipe or a file (no
    terminal to wrap to), it widens itself so that no cell of a table (a number, an interval,
    an entry id, a header) is ever cut to ``…``: every column gets its natural width, except
    the columns that fold (long texts), which may fold down to :data:`FOLD_WIDTH` characters.

    On a terminal it is a plain :class:`rich.console.Console` (its width is the window's).
    """

    def print(self, *objects: Any, **kw: Any) -> None:  # type: ignore[override]
        if not self.is_terminal:
            need = [uncut_width(self, o) for o in objects if hasattr(o, "__rich_measure__")]
            if need and max(need) > self.width:
                self.width = max(need)
        super().print(*objects, **kw)


#: Narrowest a folding table column (a long text) is counted at, characters with padding.
FOLD_WIDTH = 8


def uncut_width(con: Console, renderable: Any) -> int:
    """Characters ``renderable`` needs so that nothing in it is cut: its natural width, less
    what its folding table columns may give up (they fold down to :data:`FOLD_WIDTH`)."""
    wide = con.options.update_width(1 << 16)
    need = Measurement.get(con, wide, renderable).maximum
    for col in getattr(renderable, "columns", []):
        if col.overflow == "fold":
            m = renderable._measure_column(con, wide, col)  # rich.table.Table's own measure
            need -= m.maximum - min(m.maximum, FOLD_WIDTH)
    return int(need)


#: exit code of a refused command (bad settings, a library error, a damaged store)
EXIT_ERROR = 2

F = TypeVar("F", bound=Callable[..., Any])


def fail(e: Exception | str) -> NoReturn:
    """Print ``error: <e>`` on one line of standard error and exit with code 2.

    Parameters
    ----------
    e : Exception or str
        What went wrong, as the user should read it.

    Raises
    ------
    typer.Exit
        Always, with code :data:`EXIT_ERROR`.
    """
    # plain text: a message may hold brackets ("[1, 2]") that rich would read as markup
    console.print(Text.assemble(("error:", "red"), " ", str(e)), highlight=False, soft_wrap=True)
    raise typer.Exit(code=EXIT_ERROR)


def guarded(command: F) -> F:
    """Wrap a command so that a library error becomes one clean line and exit code 2.

    Catches :class:`~memcurator.errors.MemcuratorError` and :class:`sqlite3.DatabaseError`
    (a store file whose pages are damaged); anything else is a bug and keeps its traceback.

    Examples
    --------
    >>> from memcurator.errors import InvalidInput
    >>> def cmd() -> None:
    ...     raise InvalidInput("bad")
    >>> try:
    ...     guarded(cmd)()
    ... except typer.Exit as e:
    ...     print(e.exit_code)
    2
    """

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MemcuratorError as e:
            fail(e)
        except sqlite3.DatabaseError as e:
            fail(f"the store file is damaged or not a memcurator store (sqlite: {e})")

    return run  # type: ignore[return-value]


class App(typer.Typer):
    """A :class:`typer.Typer` whose every command is :func:`guarded`."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:  # type: ignore[override]
        register = super().command(*args, **kwargs)

        def deco(f: F) -> F:
            register(guarded(f))
            return f

        return deco


__all__ = ["EXIT_ERROR", "App", "console", "fail", "guarded"]
