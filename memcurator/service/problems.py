"""Errors as ``application/problem+json`` (RFC 9457), named after memcurator's error classes.

Every error the service returns has ``type``, ``title``, ``status``, ``detail`` and ``error``
(the :mod:`memcurator.errors` class). No traceback and no exception text of a non-memcurator
error ever reaches a client: an unexpected exception is logged on the server and answered 500
``InternalError`` with a fixed detail.

Not-found answers are built so that they cannot tell a tenant anything about another one: the
detail of :class:`~memcurator.errors.EntryNotFound` is one fixed sentence (the library's
message names the id and namespace; the id could be another tenant's), so a 404 for another
namespace's id is byte-identical to a 404 for an id that never existed.
"""

from __future__ import annotations

from memcurator.errors import (
    BudgetExceeded,
    DimensionMismatch,
    DuplicateEntry,
    EmbeddingError,
    EntryNotFound,
    Forbidden,
    InvalidInput,
    LLMError,
    MemcuratorError,
    NamespaceNotFound,
    RateLimited,
    StoreError,
    Unauthorized,
    UnknownName,
)

#: (error class, HTTP status); the first that matches wins, so subclasses come first
STATUS: tuple[tuple[type[MemcuratorError], int], ...] = (
    (Unauthorized, 401),
    (Forbidden, 403),
    (EntryNotFound, 404),
    (NamespaceNotFound, 404),
    (DuplicateEntry, 409),
    (DimensionMismatch, 409),
    (BudgetExceeded, 413),
    (RateLimited, 429),
    (UnknownName, 422),
    (InvalidInput, 422),
    (StoreError, 503),
    (LLMError, 502),
    (EmbeddingError, 502),
)

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}

#: the one detail of every entry/recall not-found answer (see the module docstring)
NOT_FOUND_DETAIL = "no such entry in this namespace (never written, evicted or forgotten)"
INTERNAL_DETAIL = "the server failed to complete the request; the error is in its log"
MEDIA_TYPE = "application/problem+json"


def problem(status: int, error: str, detail: str) -> dict[str, object]:
    """A problem document.

    Examples
    --------
    >>> problem(404, "EntryNotFound", NOT_FOUND_DETAIL)["title"]
    'Not Found'
    """
    return {
        "type": f"https://memcurator.dev/errors/{error}",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "error": error,
    }


def from_error(e: MemcuratorError) -> dict[str, object]:
    """The problem document of a library error (status from :data:`STATUS`; 400 when none
    matches, as every library error is about the request).

    Examples
    --------
    >>> from memcurator.errors import BudgetExceeded
    >>> from_error(BudgetExceeded("too big"))["status"]
    413
    """
    status = next((s for cls, s in STATUS if isinstance(e, cls)), 400)
    name = type(e).__name__
    if isinstance(e, EntryNotFound):
        return problem(404, name, NOT_FOUND_DETAIL)
    return problem(status, name, str(e))


__all__ = ["INTERNAL_DETAIL", "MEDIA_TYPE", "NOT_FOUND_DETAIL", "STATUS", "from_error", "problem"]
