"""Policies: one registry of named presets, built lazily with one ``create()`` signature.

Presets reproduce each paper and the baselines; ablations are presets too. Unknown names list
``sorted(POLICIES)`` so the message never goes stale (STYLE.md rule 8).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memcurator.errors import UnknownName
from memcurator.policy.base import Params, Policy


def _curator(**fixed: Any) -> Callable[..., Policy]:
    def make(**kw: Any) -> Policy:
        from memcurator.policy.curator import Curator

        p = Curator(**{**fixed, **kw})
        return p

    return make


def _baseline(cls_name: str) -> Callable[..., Policy]:
    def make(**kw: Any) -> Policy:
        from memcurator.policy import baselines

        return getattr(baselines, cls_name)(**kw)  # type: ignore[no-any-return]

    return make


def _tokenworth(**fixed: Any) -> Callable[..., Policy]:
    def make(**kw: Any) -> Policy:
        from memcurator.policy.tokenworth import TokenWorth

        return TokenWorth(**{**fixed, **kw})

    return make


def _curator_worth(**fixed: Any) -> Callable[..., Policy]:
    def make(**kw: Any) -> Policy:
        from memcurator.policy.tokenworth import CuratorWorth

        return CuratorWorth(**{**fixed, **kw})

    return make


POLICIES: dict[str, Callable[..., Policy]] = {
    "curator": _curator(),
    "curator/no-provenance": _curator(use_provenance=False),
    "curator/no-per-byte": _curator(per_byte=False),
    "curator/lambda=0": _curator(lam=0.0),
    "curator/no-abstraction": _curator(use_abstraction=False, distill=False),
    "curator/no-rerank": _curator(beta_q=0.0),
    "keep-all": _baseline("KeepAll"),
    "no-memory": _baseline("NoMemory"),
    "lru": _baseline("LRU"),
    "recency": _baseline("Recency"),
    "success-only": _baseline("SuccessOnly"),
    "full-oracle": _baseline("FullOracle"),
    "tokenworth": _tokenworth(),
    "tokenworth/base-only": _tokenworth(residual=False),
    "tokenworth/no-agop": _tokenworth(agop=False),
    "curator+worth": _curator_worth(),
}


def register(name: str, factory: Callable[..., Policy]) -> None:
    """Add a preset; later :func:`create_policy` calls can build it by ``name``."""
    POLICIES[name] = factory


def create_policy(name: str, **kwargs: Any) -> Policy:
    """Build a fresh policy from a preset name; ``kwargs`` override the preset's parameters.

    Raises
    ------
    UnknownName
        If ``name`` is not registered; the message lists the known names.

    Examples
    --------
    >>> create_policy("lru").name
    'lru'
    >>> create_policy("curator/no-provenance").use_provenance
    False
    """
    try:
        factory = POLICIES[name]
    except KeyError:
        raise UnknownName(f"unknown policy {name!r}; known: {sorted(POLICIES)}") from None
    pol = factory(**kwargs)
    pol.name = name
    return pol


__all__ = ["POLICIES", "Params", "Policy", "create_policy", "register"]
