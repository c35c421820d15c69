"""Wrap any executor so that every call is added to a :class:`~memcurator.llm.base.Usage`."""

from __future__ import annotations

from memcurator.llm.base import Completion, Executor, Stops, Usage, WrappedExecutor


class MeteredExecutor(WrappedExecutor):
    """An executor that accounts every completion of ``inner`` in ``usage``.

    Parameters
    ----------
    inner : Executor
    usage : Usage, optional
        Accumulator to add to; a fresh one by default. Several executors may share one.

    Examples
    --------
    >>> from memcurator.llm.fake import ScriptedExecutor
    >>> ex = MeteredExecutor(ScriptedExecutor(lambda p: "ok"))
    >>> _ = ex.complete("12345678")
    >>> ex.usage.calls, ex.usage.tokens_in
    (1, 2)
    """

    def __init__(self, inner: Executor, usage: Usage | None = None) -> None:
        self.inner = inner
        self.usage = Usage() if usage is None else usage

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Stops = None) -> Completion:
        """Complete with ``inner`` and add the result to ``usage``; errors are not counted."""
        completion = self.inner.complete(prompt, max_tokens=max_tokens, stop=stop)
        self.usage.add(completion)
        return completion
