"""Parse untrusted text with sqlglot without writing to the caller's stderr.

sqlglot logs a warning (``'...' contains unsupported syntax. Falling back to parsing as a
'Command'.``) each time it meets text it cannot parse as a statement; an action written in prose
("drop unused columns before merge") meets it on every risk check. The fallback is expected
there, and the result (an ``exp.Command``) is what the checker judges, so the message says
nothing the caller can act on. :func:`quiet_fallback` drops exactly that message, from this
thread only, while its block runs; the logger's level and handlers stay the application's
(STYLE.md rule 9: no ``setLevel`` in library code).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: the logger sqlglot's parser writes to
SQLGLOT_LOGGER = "sqlglot"
_FALLBACK = "Falling back to parsing as a 'Command'"


class _DropFallback(logging.Filter):
    """Drop the parser's fallback warning when it comes from one thread."""

    def __init__(self, thread: int):
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.thread == self.thread and _FALLBACK in str(record.msg))


@contextmanager
def quiet_fallback() -> Iterator[None]:
    """Within the block, sqlglot's "falling back to a Command" warning is not logged for this
    thread; everything else sqlglot logs passes as usual.

    Examples
    --------
    >>> from sqlglot import parse
    >>> with quiet_fallback():
    ...     type(parse("drop unused columns before merge", read="sqlite")[0]).__name__
    'Command'
    """
    log = logging.getLogger(SQLGLOT_LOGGER)
    f = _DropFallback(threading.get_ident())
    log.addFilter(f)
    try:
        yield
    finally:
        log.removeFilter(f)


__all__ = ["SQLGLOT_LOGGER", "quiet_fallback"]
