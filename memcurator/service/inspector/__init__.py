"""The browser inspector of ``memcurator serve``: ``/ui``, its read routes, and ``/docs`` offline.

:func:`mount_inspector` adds to the service's app

- ``GET /ui``: one page of vanilla HTML, CSS and JavaScript shipped in this package
  (``static/``), served from ``/ui/static``; nothing is loaded from another host (the page's
  Content-Security-Policy says ``default-src 'self'``);
- ``/ui/api/...``: the few read routes the page needs beyond ``/v1`` (overview, bytes over
  time, paged entry search, an entry with its decisions, the decision timeline, an explained
  recall, the probation queue, peers' hub traffic, the glossary), and the probation queue's two
  actions (release, forget) for an admin key. Every one takes the same bearer key through the
  service's own dependency and checks the same scopes as ``/v1`` (read; admin for an action;
  peer or admin for the hub's traffic): the API decides, the page only shows;
- ``/docs``: Swagger UI from the ``swagger-ui-bundle`` package's files, served locally
  (FastAPI's default page loads them from a CDN); ``/redoc`` is removed (no local copy).

The key is typed once into the page and kept in the tab's ``sessionStorage``; the page sends
it as ``Authorization: Bearer`` on each call, as any client does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from memcurator.service.inspector.routes import inspector_router

#: the folder of the page's files
STATIC = Path(__file__).parent / "static"
#: what the page may load: only this server
PAGE_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
#: Swagger UI's page has one inline script and inline styles
DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'"
)


def swagger_dir() -> Path | None:
    """The folder of Swagger UI's files from ``swagger-ui-bundle``; None when not installed."""
    try:
        import swagger_ui_bundle  # type: ignore[import-untyped]
    except ImportError:
        return None
    return Path(swagger_ui_bundle.swagger_ui_path)


def mount_inspector(app: FastAPI, key_of: Callable[..., Any]) -> None:
    """Add ``/ui``, ``/ui/api/*`` and an offline ``/docs`` to the service ``app``.

    Parameters
    ----------
    app : FastAPI
        Built by :func:`memcurator.service.app.create_app` (``app.state.pool``, ``.hub``).
    key_of : callable
        The service's key dependency (authenticates the bearer key, applies the rate limit).
    """
    app.include_router(inspector_router(key_of))
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="inspector-static")

    def page() -> FileResponse:
        return FileResponse(
            STATIC / "index.html",
            media_type="text/html",
            headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"},
        )

    app.add_api_route("/ui", page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui/", page, methods=["GET"], include_in_schema=False)

    # /docs: FastAPI's own page, pointed at files this server serves
    drop = {app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in drop]
    sw = swagger_dir()
    if sw is not None:
        app.mount("/ui/swagger", StaticFiles(directory=sw), name="inspector-swagger")

    def docs() -> HTMLResponse:
        if sw is None:
            return HTMLResponse(
                "<p>Swagger UI needs the swagger-ui-bundle package (pip install "
                "'memcurator[serve]'); the API's schema is at /openapi.json.</p>",
                status_code=503,
            )
        resp = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url="/ui/swagger/swagger-ui-bundle.js",
            swagger_css_url="/ui/swagger/swagger-ui.css",
            swagger_favicon_url="/ui/static/favicon.svg",
            oauth2_redirect_url="/docs/oauth2-redirect",
        )
        resp.headers["Content-Security-Policy"] = DOCS_CSP
        return resp

    def redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_api_route("/docs", docs, methods=["GET"], include_in_schema=False)
    app.add_api_route("/docs/oauth2-redirect", redirect, methods=["GET"], include_in_schema=False)


__all__ = ["DOCS_CSP", "PAGE_CSP", "STATIC", "mount_inspector", "swagger_dir"]
