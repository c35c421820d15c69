"""On-disk cache of sandbox verdicts on OS task variants (issue 23, item 2).

Checking a fresh-literal variant against the generator's validity rule costs two sandboxes
(about 1 s); a stream of a few hundred draws would spend minutes on it at every build. A
verdict depends only on the four texts of the task that was run (and, for a drift victim, on
the pre-drift reference replayed against it) and on the sandbox's settings, so the cache key
is the SHA-256 of exactly those, plus :data:`CACHE_VERSION`. Keying by content rather than by
(task id, draw) means a change to the renaming code can never serve a stale verdict: a variant
the new code builds differently is a new key and is checked again.

Folder: ``$MEMCURATOR_OS_VARIANT_CACHE``, else ``os-variants`` inside the model cache folder
(``$MEMCURATOR_CACHE_DIR/os-variants``), else ``~/.cache/memcurator/os-variants``. One small
JSON file per verdict, written to a temporary name and renamed, so concurrent builds and killed
runs leave no partial file; an unreadable file is treated as a miss and checked again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memcurator.envs.os.data import OSTask

#: Bump when what a verdict means changes (the validity rule, the sandbox's image).
CACHE_VERSION = 1
#: Environment variable naming the verdict folder.
CACHE_ENV = "MEMCURATOR_OS_VARIANT_CACHE"


def default_cache_dir() -> Path:
    """``$MEMCURATOR_OS_VARIANT_CACHE``, ``$MEMCURATOR_CACHE_DIR/os-variants`` or
    ``~/.cache/memcurator/os-variants``."""
    from memcurator.llm.gguf import CACHE_ENV as MODELS_ENV

    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    models = os.environ.get(MODELS_ENV)
    if models:
        return Path(models) / "os-variants"
    return Path.home() / ".cache" / "memcurator" / "os-variants"


class VerdictCache:
    """Sandbox verdicts by content key; ``None`` as the folder keeps them in memory only.

    Attributes
    ----------
    hits, misses : int
        Lookups answered from the cache and lookups that ran the sandbox.
    """

    def __init__(self, folder: str | os.PathLike[str] | None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self._mem: dict[str, bool] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(what: str, task: OSTask, config: Any = None, extra: str = "") -> str:
        """SHA-256 of the verdict's kind, the task's four texts, ``extra`` and the sandbox
        settings."""
        from memcurator.envs.os.sandbox import SandboxConfig

        doc = {
            "v": CACHE_VERSION,
            "what": what,
            "texts": [task.instruction, task.init, task.check, task.reference],
            "extra": extra,
            "sandbox": asdict(config if config is not None else SandboxConfig()),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> bool | None:
        """The stored verdict, or None (not stored, or the file is unreadable)."""
        if key in self._mem:
            return self._mem[key]
        if self.folder is None:
            return None
        try:
            doc = json.loads(self._path(key).read_text())
            value = doc["ok"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(value, bool):
            return None
        self._mem[key] = value
        return value

    def put(self, key: str, ok: bool, note: dict[str, Any] | None = None) -> None:
        """Store a verdict (atomically: a temporary file renamed into place)."""
        self._mem[key] = ok
        if self.folder is None:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"ok": ok, **(note or {})}, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def valid(self, task: OSTask, config: Any = None) -> bool:
        """The generator's validity rule on ``task`` (:func:`~memcurator.envs.os.protocol.
        check_validity`), from the cache or run in the sandbox.

        Raises
        ------
        SandboxUnavailable
            A miss on a host without the sandbox.
        """
        from memcurator.envs.os.protocol import check_validity

        key = self.key("validity", task, config)
        got = self.get(key)
        if got is not None:
            self.hits += 1
            return got
        self.misses += 1
        ok = check_validity(task, config).valid  # type: ignore[arg-type]
        self.put(key, ok, {"index": task.index})
        return ok

    def old_solution_fails(self, task: OSTask, old_reference: str, config: Any = None) -> bool:
        """Whether ``old_reference`` (a pre-drift solution) fails ``task``'s check, replayed
        in a fresh sandbox: a drift victim must make old exemplars wrong.

        Raises
        ------
        SandboxUnavailable
            A miss on a host without the sandbox.
        """
        from memcurator.envs.os.protocol import replay

        key = self.key("old-fails", task, config, old_reference)
        got = self.get(key)
        if got is not None:
            self.hits += 1
            return got
        self.misses += 1
        ok = not replay(task, old_reference, config).correct  # type: ignore[arg-type]
        self.put(key, ok, {"index": task.index})
        return ok


__all__ = ["CACHE_ENV", "CACHE_VERSION", "VerdictCache", "default_cache_dir"]
