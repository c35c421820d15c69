"""``Client``: a ``memcurator serve`` namespace, with :class:`~memcurator.Memory`'s method names.

One object per API key (the key names the namespace). Results come back as the response's
JSON (dicts); an error response raises the :mod:`memcurator.errors` class its problem document
names (:class:`~memcurator.errors.EntryNotFound` for a 404 on an entry, ``RateLimited`` for a
429, ...), with the server's detail as the message, so code written against ``Memory`` catches
the same errors.

Examples
--------
>>> c = Client("http://127.0.0.1:8000", key="mck_...")  # doctest: +SKIP
>>> r = c.write("Task: count rows in t\\nAction: SELECT COUNT(*) FROM t;")  # doctest: +SKIP
>>> c.recall("how many rows does t have", k=1)["ids"] == [r["id"]]  # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from memcurator import errors
from memcurator.errors import MemcuratorError, StoreError


class ServiceError(MemcuratorError, RuntimeError):
    """An error response that names no memcurator error class (a 500, a proxy's answer)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Client:
    """A namespace of a ``memcurator serve`` server, reached with one API key.

    Parameters
    ----------
    base_url : str
        ``http://127.0.0.1:8000`` and the like.
    key : str
        The API key (``memcurator keys create``).
    timeout : float, default 30.0
        Seconds per request.
    transport : httpx.BaseTransport, optional
        For tests (an in-process ASGI app, a mock).

    Raises
    ------
    MemcuratorError subclasses
        Each method raises the class the server's problem document names.
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = base_url
        self._http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            transport=transport,
        )

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self._http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise StoreError(f"memcurator server at {self.base_url} unreachable: {e}") from None
        if r.status_code >= 400:
            raise _error(r)
        if r.status_code == 204:
            return None
        if r.headers.get("content-type", "").startswith("text/plain"):
            return r.text
        return r.json()

    # ------------------------------------------------------------------ Memory's methods
    def write(self, text: str, **kw: Any) -> dict[str, Any]:
        """:meth:`memcurator.Memory.write`: kind, origin (``"external"`` at most lowers the
        key's), raw_text, meta, user, personal."""
        return self._call("POST", "/v1/write", json={"text": text, **kw})

    def recall(self, query: str, k: int = 1, **kw: Any) -> dict[str, Any]:
        """:meth:`memcurator.Memory.recall`; ``where`` is a list of ``{field, op, value}``."""
        return self._call("POST", "/v1/recall", json={"query": query, "k": k, **kw})

    def feedback(self, used: Iterable[str] | dict[str, Any], reward: float) -> None:
        """:meth:`memcurator.Memory.feedback`: ``used`` is a recall's response (its features
        are learned from) or entry ids."""
        if isinstance(used, dict):
            body: dict[str, Any] = {"recall_id": used["recall_id"], "reward": reward}
        else:
            body = {"used": list(used), "reward": reward}
        self._call("POST", "/v1/feedback", json=body)

    def record(self, task: dict[str, Any], trajectory: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """:meth:`memcurator.Memory.record` with the task and trajectory as dicts."""
        used = kw.pop("used", None)
        body: dict[str, Any] = {"task": task, "trajectory": trajectory, **kw}
        if isinstance(used, dict):
            body["recall_id"] = used["recall_id"]
        elif used is not None:
            body["used"] = list(used)
        return self._call("POST", "/v1/record", json=body)

    def update(self, entry_id: str, text: str, *, reason: str = "") -> dict[str, Any]:
        """:meth:`memcurator.Memory.update`."""
        return self._call("PUT", f"/v1/entries/{entry_id}", json={"text": text, "reason": reason})

    def forget(self, entry_id: str, *, reason: str = "forget requested") -> dict[str, Any]:
        """:meth:`memcurator.Memory.forget`."""
        return self._call("DELETE", f"/v1/entries/{entry_id}", params={"reason": reason})

    def forget_all(self, *, reason: str = "forget_all requested") -> dict[str, Any]:
        """:meth:`memcurator.Memory.forget_all` (admin scope)."""
        return self._call("POST", "/v1/forget-all", json={"reason": reason})

    def get(self, entry_id: str) -> dict[str, Any]:
        """:meth:`memcurator.Memory.get`."""
        return self._call("GET", f"/v1/entries/{entry_id}")

    def entries(self, **filters: Any) -> list[dict[str, Any]]:
        """:meth:`memcurator.Memory.entries`, every page, with the listing's filters (kind,
        origin, user, created_from_step, created_to_step, admitted_after, admitted_before)."""
        out: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = self._call("GET", "/v1/entries", params={**filters, "offset": offset})
            out += page["entries"]
            offset = page["next_offset"]
        return out

    def decisions(self, *, since: int = 0, action: str | None = None) -> list[dict[str, Any]]:
        """:meth:`memcurator.Memory.decisions`, every page."""
        out: list[dict[str, Any]] = []
        nxt: int | None = since
        while nxt is not None:
            params: dict[str, Any] = {"since": nxt, "limit": 1000}
            if action is not None:
                params["action"] = action
            page = self._call("GET", "/v1/decisions", params=params)
            out += page["decisions"]
            nxt = page["next_since"]
        return out

    def namespace(self) -> dict[str, Any]:
        """The key's namespace: policy, budget, bytes used, entries, decisions, step."""
        return self._call("GET", "/v1/namespaces")[0]

    @property
    def used_bytes(self) -> int:
        """Resident bytes of the namespace."""
        return int(self.namespace()["used_bytes"])

    @property
    def max_bytes(self) -> int | None:
        """The namespace's byte budget (None: unbounded)."""
        return self.namespace()["max_bytes"]

    def set_max_bytes(self, max_bytes: int) -> dict[str, Any]:
        """Change the budget (admin scope); a smaller one evicts at once."""
        name = self.namespace()["name"]
        return self._call("PATCH", f"/v1/namespaces/{name}", json={"max_bytes": max_bytes})

    def __len__(self) -> int:
        return int(self.namespace()["entries"])

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz")

    def metrics(self) -> str:
        """Prometheus text of the namespace (admin scope)."""
        return self._call("GET", "/metrics")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error(r: httpx.Response) -> MemcuratorError:
    """The exception of an error response (the class its problem document names)."""
    try:
        doc = r.json()
        name, detail = str(doc.get("error", "")), str(doc.get("detail", r.text))
    except ValueError:
        name, detail = "", r.text[:500]
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, MemcuratorError):
        if cls is errors.RateLimited:
            wait = float(r.headers.get("Retry-After", "1"))
            return errors.RateLimited(detail, wait)
        return cls(detail)
    # a class outside memcurator.errors (HTTPError, InternalError) or no problem document
    return ServiceError(f"{r.status_code} {name or 'error'}: {detail}", r.status_code)


__all__ = ["Client", "ServiceError"]
