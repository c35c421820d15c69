"""What stands between a request and the routes: the body-size limit (declared and streamed),
the error handlers that answer ``application/problem+json``, and the middleware that turns
an unexpected exception into a logged 500 and counts every request in the metrics.

The body limit is a plain ASGI middleware (:class:`BodyLimit`), so the MCP server's HTTP
transport (:mod:`memcurator.service.mcp_server`) is wrapped by the same one: a request whose
``Content-Length`` is over the limit is refused before anything is read, and a chunked (or
otherwise streamed) body is counted as it arrives and refused as soon as it passes the limit,
never read whole.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memcurator.errors import MemcuratorError
from memcurator.service.problems import INTERNAL_DETAIL, MEDIA_TYPE, from_error, problem

log = logging.getLogger("memcurator.service")

#: the largest request body accepted, bytes (a write's text is further bounded by the memory's
#: ``max_text_bytes``, its ``meta`` by :data:`memcurator.limits.MAX_META_BYTES`)
MAX_BODY_BYTES = 1 << 20

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """A request body over the limit (413), raised while it is being received."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=body_detail(limit))


def body_detail(limit: int) -> str:
    """The detail of every 413 for a body over ``limit`` bytes."""
    return f"request body over {limit} bytes (the service's body limit)"


def _declared_size(scope: dict[str, Any]) -> int | None:
    """The request's ``Content-Length``: None when absent, -1 when malformed."""
    for k, v in scope.get("headers", ()):
        if k == b"content-length":
            try:
                n = int(v)
            except ValueError:
                return -1
            return n if n >= 0 else -1
    return None


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes``, declared or streamed.

    Parameters
    ----------
    app : ASGI application
    max_bytes : int
        The largest body accepted, bytes.

    A malformed ``Content-Length`` gets 400, one over the limit 413, both before the body is
    read. Otherwise every ``http.request`` message is counted as the application receives
    it; the one that passes the limit raises :class:`BodyTooLarge` inside the application
    (FastAPI answers it with the error handlers of :func:`install`), and when the
    application lets it through with no response started yet, this middleware answers 413.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        size = _declared_size(scope)
        if size == -1:
            await _send_problem(send, problem(400, "InvalidInput", "bad Content-Length"))
            return
        if size is not None and size > self.max_bytes:
            await _send_problem(send, problem(413, "InvalidInput", body_detail(self.max_bytes)))
            return
        seen = 0
        started = False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return msg  # type: ignore[no-any-return]

        async def watched(msg: dict[str, Any]) -> None:
            nonlocal started
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await _send_problem(send, problem(413, "InvalidInput", body_detail(self.max_bytes)))


async def _send_problem(send: Any, doc: dict[str, object]) -> None:
    body = json.dumps(doc).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": int(doc["status"]),  # type: ignore[call-overload]
            "headers": [
                (b"content-type", MEDIA_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def problem_response(doc: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    """``doc`` as an ``application/problem+json`` response with its status."""
    status = int(doc["status"])  # type: ignore[call-overload]
    return JSONResponse(doc, status_code=status, media_type=MEDIA_TYPE, headers=headers)


async def library_error(request: Request, e: Exception) -> Response:
    """A library error as its problem (429 with ``Retry-After``, 401 with
    ``WWW-Authenticate``)."""
    assert isinstance(e, MemcuratorError)
    doc = from_error(e)
    headers = None
    if doc["status"] == 429:
        headers = {"Retry-After": str(max(1, math.ceil(getattr(e, "retry_after_s", 1.0))))}
    if doc["status"] == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return problem_response(doc, headers)


async def invalid_request(request: Request, e: Exception) -> Response:
    """A request the schemas refuse: 400 for a body that is not JSON, else 422 naming up to
    five fields and what is wrong with each."""
    assert isinstance(e, RequestValidationError)
    errs = e.errors()
    if any(err.get("type") == "json_invalid" for err in errs):
        return problem_response(problem(400, "InvalidInput", "the body is not valid JSON"))
    parts = []
    for err in errs[:5]:
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        parts.append(f"{where or 'body'}: {err.get('msg', 'invalid')}")
    return problem_response(problem(422, "InvalidInput", "; ".join(parts)))


async def http_error(request: Request, e: Exception) -> Response:
    """Starlette's own errors (no such route, wrong method, a body over the limit)."""
    assert isinstance(e, StarletteHTTPException)
    if isinstance(e, BodyTooLarge):
        return problem_response(problem(413, "InvalidInput", str(e.detail)))
    detail = "no such route" if e.status_code == 404 else str(e.detail)
    return problem_response(problem(e.status_code, "HTTPError", detail))


def install(app: FastAPI, max_body_bytes: int = MAX_BODY_BYTES) -> None:
    """Add the error handlers, the body limit and the guard middleware to ``app``.

    The guard (outermost) times every request into ``app.state.metrics`` and turns an
    unexpected exception into a logged 500 ``InternalError`` whose detail says nothing more.
    """
    app.add_exception_handler(MemcuratorError, library_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)  # type: ignore[arg-type]
    metrics = app.state.metrics

    @app.middleware("http")
    async def _guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]):
        t0 = time.perf_counter()
        try:
            resp = await call_next(request)
        except Exception:  # the one place a bug is turned into a 500, logged in full
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            resp = problem_response(problem(500, "InternalError", INTERNAL_DETAIL))
        route = getattr(request.scope.get("route"), "path", "unmatched")
        ns = getattr(request.state, "namespace", "")
        metrics.observe(ns, route, request.method, resp.status_code, time.perf_counter() - t0)
        return resp


__all__ = ["MAX_BODY_BYTES", "BodyLimit", "BodyTooLarge", "install", "problem_response"]
