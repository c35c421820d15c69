"""A scripted executor for unit tests.

It is never used in reports or benchmarks: its text is whatever the test scripted, its token
counts are a character-count estimate, and its latency is zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from memcurator.errors import InvalidInput, LLMError
from memcurator.llm.base import Completion, Stops, check_request


class ScriptedExecutor:
    """Answer prompts from a function or a dict — for unit tests only, never used in reports.

    Parameters
    ----------
    responder : callable (str -> str) or dict of str to str
        Gives the raw response to a prompt. A dict must hold every prompt it is asked.
    tokens_per_char : float, tokens per character, default 0.25
        Estimate used for ``tokens_in`` / ``tokens_out`` (at least 1 token each) and for
        truncating the response to ``max_tokens``.
    model : str, default "scripted"
        Reported model id.

    Attributes
    ----------
    prompts : list of str
        Every prompt completed, in order (for assertions).

    Raises
    ------
    InvalidInput
        ``tokens_per_char`` not a finite number > 0, or a responder of the wrong type.

    Examples
    --------
    >>> ex = ScriptedExecutor({"Q": "SELECT 1; -- done"})
    >>> ex.complete("Q", stop=[";"]).text
    'SELECT 1'
    >>> ex.complete("Q", max_tokens=1).text
    'SELE'
    """

    name = "fake"
    temperature = 0.0

    def __init__(
        self,
        responder: Callable[[str], str] | dict[str, str],
        tokens_per_char: float = 0.25,
        model: str = "scripted",
    ) -> None:
        if not (callable(responder) or isinstance(responder, dict)):
            raise InvalidInput(f"responder must be a callable or a dict, got {type(responder)}")
        if not math.isfinite(tokens_per_char) or tokens_per_char <= 0:
            raise InvalidInput(
                f"tokens_per_char must be a finite number > 0, got {tokens_per_char!r}"
            )
        self.responder = responder
        self.tokens_per_char = tokens_per_char
        self.model = model
        self.prompts: list[str] = []

    @property
    def model_id(self) -> str:
        """The reported model id."""
        return self.model

    def __repr__(self) -> str:
        return f"ScriptedExecutor(tokens_per_char={self.tokens_per_char!r}, model={self.model!r})"

    def _tokens(self, text: str) -> int:
        return max(1, math.ceil(len(text) * self.tokens_per_char))

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Stops = None) -> Completion:
        """Return the scripted response, cut at the first stop sequence and at ``max_tokens``.

        Raises
        ------
        InvalidInput
            Bad arguments (see :func:`~memcurator.llm.base.check_request`).
        LLMError
            A dict responder has no entry for ``prompt``, or the responder returned a non-str.
        """
        stops = check_request(prompt, max_tokens, stop)
        if isinstance(self.responder, dict):
            if prompt not in self.responder:
                raise LLMError(f"no scripted response for prompt {prompt!r:.80}")
            text = self.responder[prompt]
        else:
            text = self.responder(prompt)
        if not isinstance(text, str):
            raise LLMError(f"responder returned {type(text).__name__}, expected str")
        cuts = [i for i in (text.find(s) for s in stops) if i >= 0]
        if cuts:
            text = text[: min(cuts)]
        text = text[: int(max_tokens / self.tokens_per_char)]
        self.prompts.append(prompt)
        return Completion(
            text=text,
            tokens_in=self._tokens(prompt),
            tokens_out=self._tokens(text) if text else 0,
            latency_s=0.0,
            cost_usd=0.0,
            model=self.model,
        )
