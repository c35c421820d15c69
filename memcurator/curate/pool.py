"""MemPilot's heterogeneous model pool: prices, the affine latency proxy, and who answers.

Each model has a price (USD per 1M input/output tokens) and a latency profile
``(b, a_in, a_out)``. A call's cost is MemPilot Eq. 14, ``1e-6 (p_in n_in + p_out n_out)``, and
its proxy latency Eq. 17, ``b + a_in n_in + a_out n_out``; the measured wall-clock latency is
kept next to it. A pool is read from a TOML file (``--pool FILE``)::

    [[model]]
    name = "local"            # the agent's own executor (the bundled GGUF model in the bench)
    kind = "executor"
    latency = [0.1, 5e-3, 5e-2]

    [[model]]
    name = "qwen-8b"          # any OpenAI-compatible endpoint
    kind = "openai"
    base_url = "http://localhost:8000/v1"
    model = "Qwen3-8B"
    price_in = 0.05           # USD per 1M input tokens
    price_out = 0.08
    latency = [0.439, 3.6e-5, 4.99e-3]
    timeout_s = 20

Kinds: ``executor`` (the agent's executor), ``openai`` (an endpoint, built lazily with
:class:`~memcurator.llm.openai_compat.OpenAICompatExecutor`), ``extractive`` (the no-LLM
curator: zero price, its measured CPU time), and ``expert-sim``: **an offline stand-in** for a
priced expert curator — it runs the extractive ``align`` operator and is billed at the expert's
price and latency profile on the tokens a prompt over the same evidence would carry
(characters / 4). The bench's expert replays reference SQL, which must never reach a payload,
so no real expert can curate offline; with a real endpoint list it in the file as ``openai``.

References
----------
MemPilot, App. A.1 (Eq. 14-19) and A.2 (Table 3: prices and latency profiles).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcurator.errors import InvalidInput, UnknownName
from memcurator.llm.latency import AffineLatency

KINDS = ("executor", "openai", "extractive", "expert-sim")

#: Rough profile of the bundled Gemma-3-270M on a 2-core CPU: about 5 s for 400 prompt and 57
#: generated tokens (docs/bench-200x3.md: ~1,000 LLM s over 200 tasks). A guess, not a fit.
LOCAL_PROFILE = AffineLatency(0.1, 5.0e-3, 5.0e-2)
#: MemPilot Table 3, Claude-Haiku-4.5 (text terms): the expert-sim's profile.
EXPERT_PROFILE = AffineLatency(1.189, 3.5e-5, 1.151e-2)


@dataclass
class PoolModel:
    """One model of the pool.

    Parameters
    ----------
    name : str
        Id the orchestrator chooses by (anonymised, as in MemPilot Sec. 3.2).
    kind : {"executor", "openai", "extractive", "expert-sim"}
    price_in, price_out : float, USD per 1M tokens
    latency : AffineLatency
        ``(b, a_in, a_out)`` of MemPilot Eq. 17, seconds, s/token, s/token.
    options : dict
        ``openai``: ``base_url``, ``model``, ``api_key_env``, ``timeout_s``.

    Raises
    ------
    InvalidInput
        Unknown kind, negative or non-finite price or latency coefficient.
    """

    name: str
    kind: str
    price_in: float = 0.0
    price_out: float = 0.0
    latency: AffineLatency = LOCAL_PROFILE
    options: dict[str, Any] = field(default_factory=dict)
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidInput(f"model {self.name!r}: unknown kind {self.kind!r}; known: {KINDS}")
        vals = (self.price_in, self.price_out, self.latency.b_s, self.latency.a_in_s,
                self.latency.a_out_s)  # fmt: skip
        if not all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in vals):
            raise InvalidInput(
                f"model {self.name!r}: prices and latency coefficients must be finite numbers "
                f">= 0, got {vals}"
            )

    @property
    def uses_llm(self) -> bool:
        """True when a call runs a language model (executor or endpoint)."""
        return self.kind in ("executor", "openai")

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        """MemPilot Eq. 14 for one call, USD.

        Examples
        --------
        >>> PoolModel("m", "openai", 0.05, 0.08).cost(1_000_000, 1_000_000)
        0.13
        """
        return 1e-6 * (self.price_in * tokens_in + self.price_out * tokens_out)

    def proxy(self, tokens_in: int, tokens_out: int) -> float:
        """MemPilot Eq. 17 for one text call, seconds."""
        return float(self.latency(tokens_in, tokens_out))

    def executor(self, agent_executor: Any) -> Any:
        """The executor that answers for this model (built once for an endpoint).

        Raises
        ------
        InvalidInput
            An ``executor`` model without an agent executor, or a model kind without one.
        """
        if self.kind == "executor":
            if agent_executor is None:
                raise InvalidInput(f"model {self.name!r} needs the agent's executor; none given")
            return agent_executor
        if self.kind == "openai":
            if self._client is None:
                from memcurator.llm.openai_compat import OpenAICompatExecutor

                opts = dict(self.options)
                import os

                key_env = opts.pop("api_key_env", None)
                self._client = OpenAICompatExecutor(
                    base_url=opts.get("base_url"),
                    model=opts.get("model"),
                    api_key=os.environ.get(key_env) if key_env else opts.get("api_key"),
                    timeout_s=float(opts.get("timeout_s", 30)),
                    price_in=self.price_in,
                    price_out=self.price_out,
                )
            return self._client
        raise InvalidInput(f"model {self.name!r} of kind {self.kind!r} has no executor")


class ModelPool:
    """Name → :class:`PoolModel`, in a stable order (the orchestrator's model choices).

    Parameters
    ----------
    models : list of PoolModel
        At least one; names unique.

    Raises
    ------
    InvalidInput
        Empty pool or duplicate names.

    Examples
    --------
    >>> pool = default_pool()
    >>> pool.names
    ['extractive', 'local', 'expert-sim']
    >>> pool["local"].kind
    'executor'
    """

    def __init__(self, models: list[PoolModel]):
        if not models:
            raise InvalidInput("a model pool needs at least one model")
        names = [m.name for m in models]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidInput(f"model names listed twice in the pool: {dup}")
        self.models = list(models)
        self._by = {m.name: m for m in models}

    @property
    def names(self) -> list[str]:
        """Model names, in pool order."""
        return [m.name for m in self.models]

    def __getitem__(self, name: str) -> PoolModel:
        if name not in self._by:
            raise UnknownName(f"no model {name!r} in the pool; known: {sorted(self._by)}")
        return self._by[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by

    def __repr__(self) -> str:
        return f"ModelPool({self.names})"


def default_pool() -> ModelPool:
    """The pool used when no file is given: extractive (free), the agent's local model, and the
    offline expert stand-in at :data:`~memcurator.llm.pricing.DEFAULT_EXPERT_PRICE`."""
    from memcurator.llm.pricing import DEFAULT_EXPERT_PRICE

    return ModelPool(
        [
            PoolModel("extractive", "extractive", 0.0, 0.0, AffineLatency(0.0, 0.0, 0.0)),
            PoolModel("local", "executor", 0.0, 0.0, LOCAL_PROFILE),
            PoolModel(
                "expert-sim",
                "expert-sim",
                DEFAULT_EXPERT_PRICE.usd_per_mtok_in,
                DEFAULT_EXPERT_PRICE.usd_per_mtok_out,
                EXPERT_PROFILE,
            ),
        ]
    )


def _model(d: Mapping[str, Any], where: str) -> PoolModel:
    if not isinstance(d, Mapping) or "name" not in d or "kind" not in d:
        raise InvalidInput(f"{where}: each [[model]] needs a name and a kind, got {dict(d)!r}")
    lat = d.get("latency", None)
    if lat is None:
        prof = LOCAL_PROFILE if d["kind"] == "executor" else EXPERT_PROFILE
    else:
        if not isinstance(lat, list | tuple) or len(lat) < 3:
            raise InvalidInput(f"{where}: latency of {d['name']!r} must be [b, a_in, a_out]")
        prof = AffineLatency(float(lat[0]), float(lat[1]), float(lat[2]))
    opts = {k: v for k, v in d.items() if k not in ("name", "kind", "price_in", "price_out",
                                                    "latency")}  # fmt: skip
    if d["kind"] == "openai" and not opts.get("model"):
        raise InvalidInput(f"{where}: endpoint {d['name']!r} needs a 'model'")
    try:
        return PoolModel(
            str(d["name"]),
            str(d["kind"]),
            float(d.get("price_in", 0.0)),
            float(d.get("price_out", 0.0)),
            prof,
            opts,
        )
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{where}: model {d['name']!r}: {e}") from None


def load_pool(path: str | Path) -> ModelPool:
    """Read a pool from a TOML file of ``[[model]]`` tables (see the module docstring).

    Raises
    ------
    InvalidInput
        Unreadable or invalid TOML, no ``[[model]]`` tables, a malformed model.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidInput(f"cannot read model pool {str(p)!r}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{str(p)!r} is not a valid model pool (TOML): {e}") from None
    models = data.get("model")
    if not isinstance(models, list) or not models:
        raise InvalidInput(f"{str(p)!r} holds no [[model]] tables")
    return ModelPool([_model(m, str(p)) for m in models])


__all__ = [
    "EXPERT_PROFILE",
    "KINDS",
    "LOCAL_PROFILE",
    "ModelPool",
    "PoolModel",
    "default_pool",
    "load_pool",
]
