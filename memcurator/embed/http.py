"""What the OpenAI-compatible embedder and executor share: a context-managed object closed by
``close()``, and the HTTP client such an object owns (created on first use, closed by
:meth:`HTTPClientOwner.close` only when the object created it).

It sits in :mod:`memcurator.embed`, the lower of the two layers, so that
:mod:`memcurator.llm` can use it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    import httpx


class Closing:
    """A context manager whose exit calls :meth:`close` (which a subclass defines)."""

    def close(self) -> None:  # pragma: no cover - every subclass defines its own
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HTTPClientOwner(Closing):
    """An object that posts JSON to an endpoint through an ``httpx.Client``.

    A subclass sets ``_client`` (the caller's client or None), ``_owns_client`` (True when
    none was given) and ``_api_key`` (sent as a Bearer token when set) in its constructor,
    and has a ``timeout_s`` (seconds).
    """

    _client: httpx.Client | None
    _owns_client: bool
    _api_key: str | None
    timeout_s: float

    def _http(self) -> tuple[httpx.Client, dict[str, str]]:
        """The client (created on first use) and the request headers (JSON, the API key)."""
        if self._client is None:
            import httpx  # only an object that posts pays for importing it

            self._client = httpx.Client(timeout=self.timeout_s)
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return self._client, headers

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["Closing", "HTTPClientOwner"]
