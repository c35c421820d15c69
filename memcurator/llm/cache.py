"""A persistent prompt cache for deterministic executors (SQLite, WAL, safe for two processes).

With greedy decoding (temperature 0) the same model, prompt and limits give the same text, so a
benchmark that runs many memory policies over identical prompts need not recompute them. A hit is
returned with ``cached=True`` and the tokens, latency and cost measured when the call really ran,
so reports still count what each call costs.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from memcurator.embed.http import Closing
from memcurator.errors import InvalidInput, StoreError
from memcurator.llm.base import Completion, Executor, Stops, WrappedExecutor, check_request
from memcurator.store.connection import retry_busy

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key         TEXT PRIMARY KEY,
    executor    TEXT NOT NULL,
    model       TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    max_tokens  INTEGER NOT NULL,
    stop        TEXT NOT NULL,
    temperature REAL NOT NULL,
    text        TEXT NOT NULL,
    tokens_in   INTEGER NOT NULL,
    tokens_out  INTEGER NOT NULL,
    latency_s   REAL NOT NULL,
    cost_usd    REAL NOT NULL,
    out_model   TEXT NOT NULL
)
"""


class CachedExecutor(WrappedExecutor, Closing):
    """Serve repeated deterministic calls of ``inner`` from a SQLite file.

    The key is (executor name, model id, prompt mode ``chat`` where the executor has one, prompt,
    max_tokens, stop sequences, temperature). Only greedy decoding is cacheable: a sampled
    completion is a draw, and replaying it would hide the variance a report must show.

    Parameters
    ----------
    inner : Executor
        Must have ``temperature == 0``.
    path : str or Path
        SQLite file; created with its parent folders if missing.
    busy_timeout_s : float, seconds, default 30
        How long a call waits for another process holding the write lock.

    Attributes
    ----------
    hits, misses : int
        Calls served from the file, and calls passed to ``inner``, by this instance.

    Raises
    ------
    InvalidInput
        ``inner`` has a temperature other than 0, or none.
    StoreError
        The file cannot be opened as a cache.

    Examples
    --------
    >>> import tempfile, os
    >>> from memcurator.llm.fake import ScriptedExecutor
    >>> d = tempfile.mkdtemp()
    >>> ex = CachedExecutor(ScriptedExecutor(lambda p: p.upper()), os.path.join(d, "c.sqlite"))
    >>> ex.complete("select 1").cached, ex.complete("select 1").cached
    (False, True)
    >>> ex.hits, ex.misses
    (1, 1)
    >>> ex.close()
    """

    def __init__(self, inner: Executor, path: str | Path, busy_timeout_s: float = 30.0) -> None:
        temperature = getattr(inner, "temperature", None)
        if temperature is None or float(temperature) != 0.0:
            raise InvalidInput(
                f"CachedExecutor needs deterministic decoding (temperature 0); {inner!r} has "
                f"temperature {temperature!r}. Use the executor uncached, or set temperature=0."
            )
        if busy_timeout_s <= 0:
            raise InvalidInput(f"busy_timeout_s must be > 0 seconds, got {busy_timeout_s!r}")
        self.inner = inner
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.hits = 0
        self.misses = 0
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        what = self._what = f"prompt cache {str(p)!r}"
        try:
            db = sqlite3.connect(p, timeout=busy_timeout_s, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        except sqlite3.Error as e:
            raise StoreError(f"cannot open {what}: {e}") from e
        # a second process opening a brand-new file can meet "database is locked" while the first
        # switches it to WAL; SQLite's busy handler does not cover that, so retry
        retry_busy(
            lambda: db.execute("PRAGMA journal_mode = WAL"), timeout_s=busy_timeout_s, what=what
        )
        retry_busy(lambda: db.execute(_SCHEMA), timeout_s=busy_timeout_s, what=what)
        self._db: sqlite3.Connection | None = db

    @property
    def temperature(self) -> float:
        """Always 0.0 (checked at construction)."""
        return 0.0

    def __repr__(self) -> str:
        return f"CachedExecutor({self.inner!r}, path={str(self.path)!r})"

    def close(self) -> None:
        """Close the SQLite connection; later calls raise StoreError."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self._what} is closed")
        return self._db

    def _key_fields(self, prompt: str, max_tokens: int, stops: list[str]) -> dict[str, object]:
        return {
            "executor": self.inner.name,
            "model": self.inner.model_id,
            "chat": bool(getattr(self.inner, "chat", False)),  # None (gguf default) is raw
            "prompt": prompt,
            "max_tokens": max_tokens,
            "stop": stops,
            "temperature": 0.0,
        }

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Stops = None) -> Completion:
        """Return the stored completion for this exact call, or run ``inner`` and store it.

        Returns
        -------
        Completion
            On a hit ``cached=True`` with the originally measured ``tokens_in``, ``tokens_out``,
            ``latency_s`` (seconds) and ``cost_usd`` (USD).

        Raises
        ------
        InvalidInput
            Bad arguments.
        LLMError
            From ``inner`` on a miss (failures are not stored).
        StoreError
            The cache file could not be read or written (e.g. locked past ``busy_timeout_s``).
        """
        stops = check_request(prompt, max_tokens, stop)
        fields = self._key_fields(prompt, max_tokens, stops)
        key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8")).hexdigest()
        db = self._conn()
        try:
            row = retry_busy(
                lambda: db.execute(
                    "SELECT text, tokens_in, tokens_out, latency_s, cost_usd, out_model "
                    "FROM completions WHERE key = ?",
                    (key,),
                ).fetchone(),
                timeout_s=self.busy_timeout_s,
                what=self._what,
            )
        except sqlite3.Error as e:
            raise StoreError(f"{self._what} read failed: {e}") from e
        if row is not None:
            self.hits += 1
            text, tokens_in, tokens_out, latency_s, cost_usd, out_model = row
            return Completion(text, tokens_in, tokens_out, latency_s, cost_usd, out_model, True)
        self.misses += 1
        c = self.inner.complete(prompt, max_tokens=max_tokens, stop=stops)
        try:
            # another process may have stored the same deterministic call meanwhile: keep the first
            row_values = (
                key,
                fields["executor"],
                fields["model"],
                prompt,
                max_tokens,
                json.dumps(stops),
                0.0,
                c.text,
                c.tokens_in,
                c.tokens_out,
                c.latency_s,
                c.cost_usd,
                c.model,
            )
            retry_busy(
                lambda: db.execute(
                    "INSERT OR IGNORE INTO completions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    row_values,
                ),
                timeout_s=self.busy_timeout_s,
                what=self._what,
            )
        except sqlite3.Error as e:
            raise StoreError(f"{self._what} write failed: {e}") from e
        return c
