"""``memcurator serve``: the memory as a REST service, tenants by API key (issue 21).

Needs the ``serve`` extra (``pip install 'memcurator[serve]'``: FastAPI, uvicorn, pydantic, and the
``mcp`` SDK for ``memcurator mcp``);
``import memcurator`` never loads it. :mod:`memcurator.service.keys` (the key table and the
rate limiter) and :mod:`memcurator.service.filters` need only the standard library, so
``memcurator keys`` works without the extra.
"""

from __future__ import annotations

from typing import Any

from memcurator.errors import MissingExtra

#: the modules the service needs, and the extra that installs them
EXTRA_MODULES = ("fastapi", "uvicorn", "pydantic", "mcp")


def require_extra() -> None:
    """Raise :class:`~memcurator.errors.MissingExtra` naming the ``serve`` extra when FastAPI,
    uvicorn or pydantic is missing."""
    import importlib

    missing = []
    for m in EXTRA_MODULES:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        raise MissingExtra(
            f"memcurator serve needs {', '.join(missing)}: pip install 'memcurator[serve]'"
        )


def create_app(store_url: str, **kw: Any) -> Any:
    """:func:`memcurator.service.app.create_app`, after checking the extra is installed."""
    require_extra()
    from memcurator.service.app import create_app as make

    return make(store_url, **kw)


__all__ = ["EXTRA_MODULES", "create_app", "require_extra"]
