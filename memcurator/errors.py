"""The one exception hierarchy of memcurator (STYLE.md rule 9).

Every error a user can meet derives from :class:`MemcuratorError` and from the matching
built-in, so ``except KeyError`` keeps working for callers that do not know this library.
"""

from __future__ import annotations


class MemcuratorError(Exception):
    """Base class of every error raised by memcurator."""


class InvalidInput(MemcuratorError, ValueError):
    """Text, score, vector or parameter that cannot be accepted (empty, NaN, wrong type)."""


class EntryNotFound(MemcuratorError, KeyError):
    """An entry id that is not in the namespace (never existed, evicted or forgotten)."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "entry not found"


class NamespaceNotFound(MemcuratorError, KeyError):
    """A namespace that does not exist in the store; reads never default to 'all'."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "namespace not found"


class DuplicateEntry(InvalidInput):
    """An update whose new text another resident entry already holds (case and whitespace
    aside): the two would be one memory; forget one of them instead."""


class Unauthorized(MemcuratorError, PermissionError):
    """A request to ``memcurator serve`` without a valid API key (missing, malformed, unknown or
    revoked); the message never says which, so a key cannot be probed."""


class Forbidden(MemcuratorError, PermissionError):
    """A valid API key asked for what it may not do: a scope it lacks (read, write, admin), or
    an origin other than its own identity's."""


class RateLimited(MemcuratorError, RuntimeError):
    """An API key over its request rate; ``retry_after_s`` says when the next request fits."""

    def __init__(self, message: str, retry_after_s: float = 1.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BudgetExceeded(MemcuratorError, ValueError):
    """An entry larger than the whole byte budget ``max_bytes``: it can never be resident."""


class DimensionMismatch(MemcuratorError, ValueError):
    """An embedding whose dimension differs from the one stored with the namespace."""


class UnknownName(MemcuratorError, KeyError):
    """A name looked up in a registry (policy, embedder, executor) that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown name"


class StoreError(MemcuratorError, RuntimeError):
    """The store could not complete an operation (locked past its timeout, corrupt schema)."""


class LLMError(MemcuratorError, RuntimeError):
    """An LLM executor failed (model file missing, endpoint unreachable, bad response)."""


class EmbeddingError(MemcuratorError, RuntimeError):
    """An embedding endpoint failed: unreachable, an HTTP error status, a malformed answer, or a
    vector of another dimension than the embedder's (:mod:`memcurator.embed.openai_compat`)."""


class ContextOverflow(LLMError):
    """A prompt does not fit the model's context window together with ``max_tokens``; an agent
    loop ends its episode here, as LifelongAgentBench's "agent context limit" does."""


class MissingExtra(MemcuratorError, ImportError):
    """An optional component whose dependencies are not installed; the message names the extra
    to install (``pip install 'memcurator[embed]'``)."""


class RunsFailed(MemcuratorError, RuntimeError):
    """Some runs of a distributed benchmark (``bench --ray``) failed after their retries; the
    others finished and were saved, and ``--resume`` runs the missing ones."""


class SharedNamespaceWarning(UserWarning):
    """A :class:`~memcurator.Memory` opened without ``namespace=`` on a store whose implicit
    ``"default"`` namespace another handle is using or already holds entries: every caller
    that leaves ``namespace`` out reads and writes the same memory. Pass ``namespace=`` (or
    ``namespace="default"`` to share it knowingly)."""
