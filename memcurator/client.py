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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from memcurator import errors
from memcurator.embed.http import Closing
from memcurator.errors import InvalidInput, MemcuratorError, StoreError
from memcurator.policy.share import ForgetNotice, SharedEntry
from memcurator.trust.outcome import SignedOutcome


class ServiceError(MemcuratorError, RuntimeError):
    """An error response that names no memcurator error class (a 500, a proxy's answer)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass
class WireBytes:
    """Bytes a :class:`Client` sent and received over HTTP, counted per request.

    ``body_sent`` / ``body_received``: request and response bodies as they crossed the socket
    (the response's raw bytes, before any content decoding); ``headers_sent`` /
    ``headers_received``: the request line or status line and every header line, as HTTP/1.1
    writes them (``name: value`` and CRLF, and the blank line). Connection set-up (TCP, TLS) is
    not counted. ``requests``: how many were made.
    """

    body_sent: int = 0
    body_received: int = 0
    headers_sent: int = 0
    headers_received: int = 0
    requests: int = 0

    @property
    def bodies(self) -> int:
        """Request + response body bytes."""
        return self.body_sent + self.body_received

    @property
    def headers(self) -> int:
        """Request + response header bytes."""
        return self.headers_sent + self.headers_received

    def copy(self) -> WireBytes:
        return WireBytes(**self.__dict__)

    def minus(self, other: WireBytes) -> WireBytes:
        """The bytes counted since ``other`` (an earlier :meth:`copy`)."""
        return WireBytes(**{k: v - getattr(other, k) for k, v in self.__dict__.items()})


def _header_bytes(first_line: str, headers: httpx.Headers) -> int:
    n = len(first_line.encode("latin-1")) + 2
    for k, v in headers.raw:
        n += len(k) + 2 + len(v) + 2
    return n + 2


class Client(Closing):
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
        #: bytes on the wire so far (:class:`WireBytes`)
        self.wire = WireBytes()
        self._http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            transport=transport,
            event_hooks={"request": [self._count_request], "response": [self._count_response]},
        )

    def _count_request(self, request: httpx.Request) -> None:
        w = self.wire
        w.requests += 1
        w.body_sent += len(request.content)
        target = request.url.raw_path.decode("ascii")
        w.headers_sent += _header_bytes(f"{request.method} {target} HTTP/1.1", request.headers)

    def _count_response(self, response: httpx.Response) -> None:
        response.read()
        w = self.wire
        # raw bytes off the socket; a response built in memory (a mock transport) has none
        # counted, so its content stands in
        w.body_received += response.num_bytes_downloaded or len(response.content)
        status = f"HTTP/1.1 {response.status_code} {response.reason_phrase}"
        w.headers_received += _header_bytes(status, response.headers)

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

    # ------------------------------------------------------------------ the peer hub
    def hub_push(
        self,
        items: Sequence[SharedEntry | ForgetNotice],
        *,
        to: str | None = None,
        round: int = 0,
    ) -> dict[str, Any]:
        """Push :meth:`memcurator.Memory.share`'s output to the key's peer group (peer scope).

        ``to``: the one peer it is for (its name; its link key signed the entries); None: every
        other peer. The hub names this key as the sender. Returns ``{seq, sender, entries,
        notices}``.
        """
        entries, notices = [], []
        for s in items:
            if isinstance(s, ForgetNotice):
                notices.append(s.source_id)
            elif isinstance(s, SharedEntry):
                entries.append(
                    {
                        "text": s.text,
                        "kind": s.kind,
                        "bytes": int(s.bytes),
                        "q": float(s.q),
                        "a": float(s.a),
                        "rho_s": float(s.rho_s),
                        "source_id": str(s.source_id),
                        "raw_text": s.raw_text,
                        "signature": None
                        if s.signature is None
                        else [s.signature.key_id, s.signature.mac],
                        "outcome": None if s.outcome is None else s.outcome.to_wire(),
                    }
                )
            else:
                raise InvalidInput(f"not a SharedEntry or ForgetNotice: {type(s).__name__}")
        body = {"to": to, "round": round, "entries": entries, "notices": notices}
        return self._call("POST", "/v1/hub/push", json=body)  # type: ignore[no-any-return]

    def hub_pull(
        self, since: int | None = 0, *, limit: int = 100
    ) -> tuple[list[tuple[str, int, list[SharedEntry | ForgetNotice]]], int]:
        """What other peers pushed after ``since`` (peer scope), every page; ``since=None``:
        after where this peer's last pull ended (the hub keeps each peer's cursor).

        Returns
        -------
        messages : list of (sender, round, items)
            Oldest first; ``items`` (notices first, then entries) go to
            ``memory.receive(items, peer=sender)``.
        next_since : int
            The cursor for the next pull.
        """
        out: list[tuple[str, int, list[SharedEntry | ForgetNotice]]] = []
        while True:
            params: dict[str, Any] = {"limit": limit}
            if since is not None:
                params["since"] = since
            page = self._call("GET", "/v1/hub/pull", params=params)
            for m in page["messages"]:
                items: list[SharedEntry | ForgetNotice] = [ForgetNotice(n) for n in m["notices"]]
                for e in m["entries"]:
                    items.append(SharedEntry.from_wire(e, outcome=_outcome(e.get("outcome"))))
                out.append((m["sender"], int(m["round"]), items))
            since = int(page["next_since"])
            if len(page["messages"]) < limit:  # the hub scanned to its end
                return out, since

    def hub_publish_sketch(self, sketch: Iterable[float], *, round: int = 0) -> None:
        """Publish this peer's query sketch (:attr:`memcurator.Memory.sketch`) to its group."""
        body = {"round": round, "sketch": [float(x) for x in sketch]}
        self._call("PUT", "/v1/hub/sketch", json=body)

    def hub_sketches(
        self, *, min_round: int = 0, peers: Iterable[str] | None = None
    ) -> dict[str, tuple[int, list[float]]]:
        """The last published ``(round, sketch)`` of each peer in the key's group, by name;
        only those of round ``min_round`` on, of ``peers`` when given."""
        params: dict[str, Any] = {"min_round": min_round}
        if peers is not None:
            params["peer"] = list(peers)
        d = self._call("GET", "/v1/hub/sketches", params=params)
        return {p: (int(v["round"]), list(v["sketch"])) for p, v in d.items()}

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz")

    def metrics(self) -> str:
        """Prometheus text of the namespace (admin scope)."""
        return self._call("GET", "/metrics")

    def close(self) -> None:
        """Close the HTTP connection pool (also on leaving a ``with`` block)."""
        self._http.close()


def _outcome(d: Any) -> SignedOutcome | None:
    """A pulled entry's signed outcome (None when it came without one, or with one that is
    not a claim: the entry then stays on probation at the receiver, as without evidence)."""
    if not d:
        return None
    try:
        return SignedOutcome.from_wire(d)
    except InvalidInput:
        return None


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


__all__ = ["Client", "ServiceError", "WireBytes"]
