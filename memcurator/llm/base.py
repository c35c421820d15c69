"""What every LLM executor returns and promises: `Completion`, `Executor`, `Usage`.

An executor turns one prompt into one :class:`Completion` that carries its own accounting (tokens,
seconds, USD), so no caller ever has to estimate what a call cost (DESIGN.md, ``llm/``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from memcurator.errors import InvalidInput

#: ``complete``'s ``stop``: strings at whose first occurrence the completion is cut (None: none).
Stops = list[str] | None


@dataclass(frozen=True)
class Completion:
    """One model call and what it cost.

    Parameters
    ----------
    text : str
        The generated text, stop sequence excluded.
    tokens_in : int, tokens
        Prompt tokens as counted by the model's own tokenizer (or the endpoint's ``usage``).
    tokens_out : int, tokens
        Generated tokens.
    latency_s : float, seconds
        Wall-clock time of the call, measured around it with the executor's clock.
    cost_usd : float, USD
        Money the call cost (0.0 for a local model).
    model : str
        Id of the model that produced the text.
    cached : bool, default False
        True when the completion was replayed from a prompt cache; ``latency_s``, ``tokens_in``,
        ``tokens_out`` and ``cost_usd`` are then those measured when the call really ran.

    Examples
    --------
    >>> c = Completion("SELECT 1;", tokens_in=12, tokens_out=4, latency_s=0.5, cost_usd=0.0,
    ...                model="m")
    >>> c.cached
    False
    """

    text: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost_usd: float
    model: str
    cached: bool = False


@runtime_checkable
class Executor(Protocol):
    """Anything that completes a prompt: a local GGUF model, a remote endpoint, a scripted fake.

    Attributes
    ----------
    name : str
        Registry name of the executor kind (``"gguf"``, ``"openai"``, ``"fake"``).
    model_id : str
        Id of the model behind it; part of every prompt-cache key.
    temperature : float
        Sampling temperature; 0.0 means greedy (deterministic) decoding.
    """

    @property
    def name(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    @property
    def temperature(self) -> float: ...

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Stops = None) -> Completion:
        """Complete ``prompt`` with at most ``max_tokens`` new tokens, cut at any of ``stop``.

        Raises
        ------
        InvalidInput
            Empty prompt or ``max_tokens < 1``.
        LLMError
            The model or endpoint failed, or its response could not be read.
        """
        ...


class WrappedExecutor:
    """An executor around another one, ``inner``: its name, model id and temperature are the
    inner executor's (a subclass may narrow them) and its ``complete`` is the subclass's."""

    inner: Executor

    @property
    def name(self) -> str:
        """Registry name of the wrapped executor."""
        return self.inner.name

    @property
    def model_id(self) -> str:
        """Model id of the wrapped executor."""
        return self.inner.model_id

    @property
    def temperature(self) -> float:
        """Temperature of the wrapped executor."""
        return self.inner.temperature

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


@dataclass
class Usage:
    """Running totals over many calls, for a benchmark to read.

    A cached call counts in ``calls`` and in every total with the cost it had when it really ran
    (what the call is worth), and also in ``cached_calls`` (what was actually recomputed is
    ``calls - cached_calls``).

    Attributes
    ----------
    calls : int
    cached_calls : int
    tokens_in, tokens_out : int, tokens
    latency_s : float, seconds
    cost_usd : float, USD

    Examples
    --------
    >>> u = Usage()
    >>> u.add(Completion("x", 10, 2, 0.25, 0.001, "m"))
    >>> u.add(Completion("x", 10, 2, 0.25, 0.001, "m", cached=True))
    >>> (u.calls, u.cached_calls, u.tokens_in, u.tokens_out, u.latency_s)
    (2, 1, 20, 4, 0.5)
    """

    calls: int = 0
    cached_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0

    def add(self, completion: Completion) -> None:
        """Account one completion."""
        self.calls += 1
        self.cached_calls += int(completion.cached)
        self.tokens_in += completion.tokens_in
        self.tokens_out += completion.tokens_out
        self.latency_s += completion.latency_s
        self.cost_usd += completion.cost_usd

    def as_dict(self) -> dict[str, float]:
        """The totals as a plain dict (for report rows)."""
        return asdict(self)


def check_request(prompt: str, max_tokens: int, stop: list[str] | None) -> list[str]:
    """Validate the arguments of :meth:`Executor.complete`; return ``stop`` as a fresh list.

    Raises
    ------
    InvalidInput
        ``prompt`` not a non-empty str, ``max_tokens`` not an int >= 1, or a stop sequence that is
        not a non-empty str.

    Examples
    --------
    >>> check_request("hi", 8, None)
    []
    >>> check_request("", 8, None)
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: prompt must be a non-empty str, got ''
    """
    if not isinstance(prompt, str) or not prompt:
        raise InvalidInput(f"prompt must be a non-empty str, got {prompt!r:.60}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput(f"max_tokens must be an int >= 1 (tokens), got {max_tokens!r}")
    stops = list(stop) if stop is not None else []
    for s in stops:
        if not isinstance(s, str) or not s:
            raise InvalidInput(f"each stop sequence must be a non-empty str, got {s!r}")
    return stops
