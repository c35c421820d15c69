"""What the OpenAI-compatible embedder and executor share: a context-managed object closed by
``close()``, and the HTTP client such an object owns (created on first use, closed by
:meth:`HTTPClientOwner.close` only when the object created it).

It sits in :mod:`memcurator.embed`, the lower of the two layers, so that
:mod:`memcurator.llm` can use it too.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Self

from memcurator.errors import InvalidInput

if TYPE_CHECKING:
    import httpx


DEFAULT_BASE_URL = "https://api.openai.com/v1"


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

    A subclass calls :meth:`_endpoint` in its constructor (the URL, model and key, and the
    caller's client or None) and has a ``timeout_s`` (seconds).
    """

    _base_url: str
    _model: str
    _client: httpx.Client | None
    _owns_client: bool
    _api_key: str | None
    timeout_s: float

    def _endpoint(
        self,
        base_url: str | None,
        model: str | None,
        api_key: str | None,
        client: httpx.Client | None,
        *,
        what: str,
        env: str,
        key_env: tuple[str, ...],
    ) -> None:
        """Resolve the endpoint, model and key, each from its argument or else the environment.

        ``base_url``, else ``${env}_BASE_URL``, ``$OPENAI_BASE_URL`` or OpenAI's URL (trailing
        ``/`` dropped); ``model``, else ``${env}_MODEL``; ``api_key``, else the first variable
        of ``key_env`` that is set and not empty.

        Raises
        ------
        InvalidInput
            No model given or set; the message names ``what`` and the variable.
        """
        root = (
            base_url
            or os.environ.get(f"{env}_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        )
        self._base_url = root.rstrip("/")
        resolved = model or os.environ.get(f"{env}_MODEL")
        if not resolved:
            raise InvalidInput(
                f"no model for the OpenAI-compatible {what}: pass model=... or set {env}_MODEL"
            )
        self._model = resolved
        if api_key is None:
            api_key = next((os.environ[k] for k in key_env if os.environ.get(k)), None)
        self._api_key = api_key
        self._client = client
        self._owns_client = client is None

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
