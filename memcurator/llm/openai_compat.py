"""Client for any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp server, Ollama, ...)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import httpx

from memcurator.embed.http import HTTPClientOwner
from memcurator.errors import InvalidInput, LLMError
from memcurator.llm.base import Completion, Stops, check_request
from memcurator.llm.pricing import Price


class OpenAICompatExecutor(HTTPClientOwner):
    """Complete prompts through ``POST {base_url}/chat/completions`` (or ``/completions``).

    Every argument left as None is read from the environment when the executor is built.

    Parameters
    ----------
    base_url : str, optional
        Endpoint root including the version, e.g. ``"http://localhost:8000/v1"``. Default:
        ``$MEMCURATOR_OPENAI_BASE_URL``, else ``$OPENAI_BASE_URL``, else
        ``"https://api.openai.com/v1"``.
    model : str, optional
        Model name sent to the endpoint. Default: ``$MEMCURATOR_OPENAI_MODEL``; required.
    api_key : str, optional
        Bearer token. Default: ``$OPENAI_API_KEY``; none is sent if unset (local servers).
    timeout_s : float, seconds, default 60
        Timeout of one HTTP request.
    chat : bool, default True
        True: the prompt is one user message to ``/chat/completions``. False: raw text to
        ``/completions``.
    price_in, price_out : float, USD per 1M tokens, default 0.0
        Price used for :attr:`Completion.cost_usd` (see :mod:`memcurator.llm.pricing`).
    client : httpx.Client, optional
        HTTP client to use (tests pass one with an ``httpx.MockTransport``). By default one is
        created on first use and closed by :meth:`close`.
    temperature : float, default 0.0
        Sampling temperature sent with every request.
    clock : callable () -> float, seconds, default time.perf_counter
        Clock read around each request to measure ``latency_s``.

    Raises
    ------
    InvalidInput
        No model given or in the environment, a non-positive timeout, a negative temperature
        or a bad price.

    Examples
    --------
    >>> ex = OpenAICompatExecutor(base_url="http://localhost:8000/v1", model="qwen", api_key="k")
    >>> ex.model_id, ex.url
    ('qwen', 'http://localhost:8000/v1/chat/completions')
    """

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60,
        chat: bool = True,
        price_in: float = 0.0,
        price_out: float = 0.0,
        client: httpx.Client | None = None,
        temperature: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.chat = chat
        self.price_in = price_in
        self.price_out = price_out
        self.client = client
        self.temperature = temperature
        self.clock = clock

        self._endpoint(
            base_url,
            model,
            api_key,
            client,
            what="executor",
            env="MEMCURATOR_OPENAI",
            key_env=("OPENAI_API_KEY",),
        )
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise InvalidInput(f"timeout_s must be a finite number > 0 seconds, got {timeout_s!r}")
        if not math.isfinite(temperature) or temperature < 0:
            raise InvalidInput(f"temperature must be a finite number >= 0, got {temperature!r}")
        self._price = Price(price_in, price_out)

    @property
    def model_id(self) -> str:
        """The model name sent to the endpoint."""
        return self._model

    @property
    def url(self) -> str:
        """The URL every request is posted to."""
        return self._base_url + ("/chat/completions" if self.chat else "/completions")

    def __repr__(self) -> str:  # never shows the API key
        return (
            f"OpenAICompatExecutor(base_url={self._base_url!r}, model={self._model!r}, "
            f"chat={self.chat!r}, temperature={self.temperature!r})"
        )

    def _payload(self, prompt: str, max_tokens: int, stops: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": max_tokens,
            "temperature": self.temperature,
        }
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if stops:
            body["stop"] = stops
        return body

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Stops = None) -> Completion:
        """Send one request and return the first choice with the endpoint's token usage.

        Parameters
        ----------
        prompt : str
        max_tokens : int, tokens, default 128
        stop : list of str, optional
            At most 4 for OpenAI itself; other servers accept more.

        Returns
        -------
        Completion
            ``tokens_in`` / ``tokens_out`` from the response's ``usage``, ``latency_s`` around the
            HTTP request, ``cost_usd`` from ``price_in`` / ``price_out``.

        Raises
        ------
        InvalidInput
            Bad arguments.
        LLMError
            Unreachable endpoint, timeout, HTTP status >= 400, or a response that is not JSON or
            lacks ``choices`` / ``usage``.
        """
        stops = check_request(prompt, max_tokens, stop)
        client, headers = self._http()
        t0 = self.clock()
        try:
            response = client.post(
                self.url,
                json=self._payload(prompt, max_tokens, stops),
                headers=headers,
                timeout=self.timeout_s,
            )
        except httpx.HTTPError as e:
            raise LLMError(f"request to {self.url} failed: {type(e).__name__}: {e}") from e
        latency_s = self.clock() - t0
        if response.status_code >= 400:
            raise LLMError(
                f"{self.url} answered HTTP {response.status_code}: {response.text[:300]!r}"
            )
        text, tokens_in, tokens_out = self._parse(response)
        return Completion(
            text=text,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_s=latency_s,
            cost_usd=self._price.cost(tokens_in, tokens_out),
            model=self._model,
        )

    def _parse(self, response: httpx.Response) -> tuple[str, int, int]:
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise LLMError(
                f"{self.url} returned a body that is not JSON: {response.text[:300]!r}"
            ) from e
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] if self.chat else choice["text"]
            usage = data["usage"]
            tokens_in = int(usage["prompt_tokens"])
            tokens_out = int(usage["completion_tokens"])
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise LLMError(
                f"{self.url} returned a malformed completion (need choices[0] and usage with "
                f"prompt_tokens/completion_tokens; missing or bad: {e!r}): {str(data)[:300]}"
            ) from e
        if not isinstance(text, str):
            # e.g. a chat message whose content is null (tool call or refusal)
            raise LLMError(f"{self.url} returned no text content: {str(data)[:300]}")
        return text, tokens_in, tokens_out
