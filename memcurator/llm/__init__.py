"""LLM executors: local GGUF models, OpenAI-compatible endpoints, and a scripted fake for tests.

Every call returns a :class:`Completion` that carries its tokens, latency (seconds) and cost
(USD). Executors are built by name from one registry, importing their dependencies only then::

    ex = create_executor("gguf")                      # bundled Gemma-3-270M, CPU
    ex = create_executor("openai", model="gpt-4o-mini", price_in=0.15, price_out=0.60)
    ex = CachedExecutor(ex, "prompts.sqlite")         # replay deterministic calls

Examples
--------
>>> sorted(EXECUTORS)
['fake', 'gguf', 'openai']
>>> create_executor("fake", responder={"Q": "A"}).complete("Q").text
'A'
"""

from __future__ import annotations

from typing import Any

from memcurator.llm.base import Completion, Executor, Usage
from memcurator.llm.cache import CachedExecutor
from memcurator.llm.metered import MeteredExecutor
from memcurator.registry import Registry

EXECUTORS: Registry[Executor] = Registry(
    "executor",
    {
        "gguf": "memcurator.llm.gguf:LlamaCppExecutor",
        "openai": "memcurator.llm.openai_compat:OpenAICompatExecutor",
        "fake": "memcurator.llm.fake:ScriptedExecutor",
    },
)
"""Executor name to class (``"module:Class"``, imported only when the name is first created)."""


def executor_class(name: str) -> type:
    """The class registered under ``name``, importing its module.

    Raises
    ------
    UnknownName
        ``name`` is not in :data:`EXECUTORS`; the message lists the registered names.
    """
    return EXECUTORS.factory(name)  # type: ignore[return-value]


def create_executor(name: str, **kwargs: Any) -> Executor:
    """Build the executor registered under ``name`` with ``kwargs`` as its constructor arguments.

    Parameters
    ----------
    name : str
        ``"gguf"``, ``"openai"``, ``"fake"`` or a name registered since in :data:`EXECUTORS`.
    **kwargs
        The executor's constructor arguments (e.g. ``model_path`` for ``"gguf"``).

    Raises
    ------
    UnknownName
        ``name`` is not in :data:`EXECUTORS`; the message lists the registered names.
    """
    return EXECUTORS.create(name, **kwargs)


__all__ = [
    "EXECUTORS",
    "CachedExecutor",
    "Completion",
    "Executor",
    "MeteredExecutor",
    "Usage",
    "create_executor",
    "executor_class",
]
