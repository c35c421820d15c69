"""Embeddings from any OpenAI-compatible ``POST /v1/embeddings`` endpoint.

OpenAI itself, vLLM, llama.cpp's server, Ollama, text-embeddings-inference, and ``memcurator
serve`` (which serves its namespace's embedder on the same route). Talks HTTP with ``httpx``, as
:class:`~memcurator.llm.openai_compat.OpenAICompatExecutor` does.

The identity a namespace records (:func:`memcurator.memory.embedder_identity`) is
``openai-<model>-<dim>``: opening a namespace embedded by another model or dimension raises
:class:`~memcurator.errors.DimensionMismatch` before anything is written, and every answer of
the endpoint is checked against ``dim``, so vectors of two models are never mixed in one
namespace.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np

from memcurator.embed.http import HTTPClientOwner
from memcurator.embed.text import check_text
from memcurator.errors import DimensionMismatch, EmbeddingError, InvalidInput

#: HTTP statuses worth retrying: rate limited, and the server or a proxy briefly unavailable
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
#: the most inputs OpenAI accepts in one request
MAX_BATCH = 2048
#: the longest wait honoured from a ``Retry-After`` header, seconds
MAX_RETRY_AFTER_S = 30.0


class OpenAICompatEmbedder(HTTPClientOwner):
    """Embed text through ``POST {base_url}/embeddings``; vectors are L2-normalised float32.

    Parameters
    ----------
    base_url : str, optional
        Endpoint root including the version, e.g. ``"http://127.0.0.1:8000/v1"``. Default:
        ``$MEMCURATOR_EMBED_BASE_URL``, else ``$OPENAI_BASE_URL``, else
        ``"https://api.openai.com/v1"``.
    model : str, optional
        Model name sent with every request. Default: ``$MEMCURATOR_EMBED_MODEL``; required.
    api_key : str, optional
        Bearer token. Default: ``$MEMCURATOR_EMBED_API_KEY``, else ``$OPENAI_API_KEY``; none is
        sent if unset (local servers). Never shown by ``repr``.
    dim : int, optional
        The model's output dimension. Every answer is checked against it. None: learned from
        one probe request the first time :attr:`dim` is read (opening a :class:`Memory` reads
        it).
    batch : int, default 64
        Inputs per request in :meth:`embed_many` (at most 2048, OpenAI's limit).
    timeout_s : float, seconds, default 30
        Timeout of one HTTP request.
    retries : int, default 3
        Further attempts after a transient failure (connection error, timeout, HTTP 408, 409,
        429, 500, 502, 503, 504); any other HTTP error status fails at once.
    backoff_s : float, seconds, default 0.5
        Wait before the first retry, doubled at each further one; a ``Retry-After`` header
        (seconds, at most 30) is honoured when longer.
    dimensions : bool, default False
        Send ``dimensions=dim`` in each request (models such as text-embedding-3 that can
        shorten their output); needs ``dim``.
    token_pooling : {"error", "mean"}, default "error"
        What to do when the server answers one vector per token instead of one per input (a
        list of lists: llama-cpp-python's server with a model whose pooling type is none, e.g.
        a causal LM): "error" raises :class:`~memcurator.errors.EmbeddingError` saying so;
        "mean" averages the token vectors, then normalises.
    client : httpx.Client, optional
        HTTP client to use; by default one is created on first use and closed by :meth:`close`.
    sleep : callable (seconds) -> None, default time.sleep
        Used between retries (tests pass a recorder; STYLE.md rule 2).

    Raises
    ------
    InvalidInput
        No model; a non-positive ``dim``, ``batch`` over 2048 or under 1, timeout or backoff;
        negative ``retries``; ``dimensions`` without ``dim``; an unknown ``token_pooling``.

    Examples
    --------
    >>> e = OpenAICompatEmbedder("http://127.0.0.1:8000/v1", "nomic-embed", dim=768, api_key="k")
    >>> e.name, e.url
    ('openai-nomic-embed-768', 'http://127.0.0.1:8000/v1/embeddings')
    >>> e
    OpenAICompatEmbedder(base_url='http://127.0.0.1:8000/v1', model='nomic-embed', dim=768)
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch: int = 64,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        dimensions: bool = False,
        token_pooling: str = "error",
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.batch = batch
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.dimensions = dimensions
        self.token_pooling = token_pooling
        self.client = client
        self.sleep = sleep

        self._endpoint(
            base_url,
            model,
            api_key,
            client,
            what="embedder",
            env="MEMCURATOR_EMBED",
            key_env=("MEMCURATOR_EMBED_API_KEY", "OPENAI_API_KEY"),
        )
        if dim is not None and (isinstance(dim, bool) or int(dim) != dim or int(dim) <= 0):
            raise InvalidInput(f"dim must be a positive integer or None, got {dim!r}")
        self._dim = None if dim is None else int(dim)
        if not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise InvalidInput(f"batch must be an integer in [1, {MAX_BATCH}], got {batch!r}")
        for what, v in (("timeout_s", timeout_s), ("backoff_s", backoff_s)):
            if not math.isfinite(v) or v < 0 or (what == "timeout_s" and v == 0):
                raise InvalidInput(f"{what} must be a finite number of seconds > 0, got {v!r}")
        if not isinstance(retries, int) or retries < 0:
            raise InvalidInput(f"retries must be an integer >= 0, got {retries!r}")
        if dimensions and dim is None:
            raise InvalidInput("dimensions=True sends dim to the endpoint: give dim too")
        if token_pooling not in ("error", "mean"):
            raise InvalidInput(f"token_pooling must be 'error' or 'mean', got {token_pooling!r}")

    # ------------------------------------------------------------------ identity
    @property
    def dim(self) -> int:
        """The output dimension (probed from the endpoint once when not given).

        Raises
        ------
        EmbeddingError
            The probe request failed.
        """
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"], check=False).shape[1])
        return self._dim

    @property
    def name(self) -> str:
        """Identifier stored with a namespace: ``openai-<model>-<dim>``."""
        return f"openai-{self._model}-{self.dim}"

    @property
    def url(self) -> str:
        """The URL every request is posted to."""
        return self._base_url + "/embeddings"

    def __repr__(self) -> str:  # never shows the API key
        return (
            f"OpenAICompatEmbedder(base_url={self._base_url!r}, model={self._model!r}, "
            f"dim={self._dim!r})"
        )

    # ------------------------------------------------------------------ embedding
    def embed(self, text: str) -> np.ndarray:
        """Embed one text (one request).

        Parameters
        ----------
        text : str

        Returns
        -------
        ndarray of shape (dim,), float32
            Unit L2 norm (the zero vector stays zero).

        Raises
        ------
        InvalidInput
            ``text`` is not a string.
        EmbeddingError
            See :meth:`embed_many`.
        DimensionMismatch
            The endpoint answered a vector of another dimension than :attr:`dim`.
        """
        check_text(text)
        return self.embed_many([text])[0]

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch, ``batch`` inputs per request, in order.

        Parameters
        ----------
        texts : sequence of str

        Returns
        -------
        ndarray of shape (len(texts), dim), float32
            Row ``i`` embeds ``texts[i]``, unit L2 norm.

        Raises
        ------
        InvalidInput
            An element is not a string.
        EmbeddingError
            Unreachable endpoint or an HTTP error status after the retries, a body that is not
            JSON, or one without one embedding per input.
        DimensionMismatch
            The endpoint answered vectors of another dimension than :attr:`dim`.
        """
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise InvalidInput(f"texts must be str, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(texts[i : i + self.batch]) for i in range(0, len(texts), self.batch)]
        return np.concatenate(parts, axis=0)

    def _request(self, texts: list[str], check: bool = True) -> np.ndarray:
        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self._dim
        response = self._post(body)
        vecs = self._parse(response, len(texts))
        if check:
            want = self.dim
            if vecs.shape[1] != want:
                raise DimensionMismatch(
                    f"{self.url} (model {self._model!r}) answered vectors of dimension "
                    f"{vecs.shape[1]}; this embedder's dimension is {want}. A different model "
                    "or dimension needs its own namespace, or `memcurator reembed`."
                )
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return (vecs / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        client, headers = self._http()
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            wait = self.backoff_s * (2**attempt)
            try:
                r = client.post(self.url, json=body, headers=headers, timeout=self.timeout_s)
            except httpx.HTTPError as e:
                if last:
                    raise EmbeddingError(
                        f"request to {self.url} failed after {attempt + 1} attempt(s): "
                        f"{type(e).__name__}: {e}"
                    ) from e
                self.sleep(wait)
                continue
            if r.status_code < 400:
                return r
            if r.status_code not in TRANSIENT_STATUS or last:
                raise EmbeddingError(
                    f"{self.url} answered HTTP {r.status_code} (model {self._model!r}, "
                    f"attempt {attempt + 1}): {r.text[:300]!r}"
                )
            self.sleep(max(wait, _retry_after(r)))
        raise AssertionError("unreachable")  # pragma: no cover

    def _parse(self, response: httpx.Response, n: int) -> np.ndarray:
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise EmbeddingError(
                f"{self.url} returned a body that is not JSON: {response.text[:300]!r}"
            ) from e
        try:
            items = sorted(data["data"], key=lambda d: int(d["index"]))
            rows = [self._vector(d["embedding"]) for d in items]
        except (KeyError, TypeError, ValueError) as e:
            raise EmbeddingError(
                f"{self.url} returned a malformed answer (need data[i].index and "
                f"data[i].embedding; missing or bad: {e!r}): {str(data)[:300]}"
            ) from e
        if len(rows) != n or [int(d["index"]) for d in items] != list(range(n)):
            raise EmbeddingError(f"{self.url} returned {len(rows)} embeddings for {n} inputs")
        if len({len(r) for r in rows}) != 1 or len(rows[0]) == 0:
            raise EmbeddingError(f"{self.url} returned embeddings of unequal or zero length")
        m = np.asarray(rows, dtype=np.float64)
        if not np.isfinite(m).all():
            raise EmbeddingError(f"{self.url} returned NaN or infinite values")
        return m

    def _vector(self, x: Any) -> list[float]:
        """A list of floats, a base64 string of little-endian float32 (``encoding_format``),
        or (``token_pooling="mean"``) a list of per-token lists, averaged."""
        if isinstance(x, str):
            return np.frombuffer(base64.b64decode(x, validate=True), dtype="<f4").tolist()
        if not isinstance(x, list):
            raise TypeError(f"embedding is {type(x).__name__}, not a list")
        if x and isinstance(x[0], list):
            if self.token_pooling != "mean":
                raise EmbeddingError(
                    f"{self.url} answered one vector per token ({len(x)} for one input), not one "
                    "per input: the model has no pooling. Serve it with a pooling type (llama.cpp "
                    "server: --pooling mean) or pass token_pooling='mean'."
                )
            return np.asarray(x, dtype=np.float64).mean(axis=0).tolist()
        return [float(v) for v in x]


def _retry_after(r: httpx.Response) -> float:
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(r.headers.get("retry-after", 0))))
    except ValueError:
        return 0.0


__all__ = ["MAX_BATCH", "TRANSIENT_STATUS", "OpenAICompatEmbedder"]
