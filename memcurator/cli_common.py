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
from rich.text import Text

from memcurator.errors import MemcuratorError

#: error and progress lines go to standard error; tables and documents to standard output
console = Console(stderr=True)

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
