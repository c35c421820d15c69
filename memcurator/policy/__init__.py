"""Policies: named presets (plain data) built into component bundles by one ``create()``.

``create_policy("curator")`` resolves the preset's spec (:mod:`memcurator.policy.presets`) and
builds a :class:`~memcurator.policy.bundle.ComponentPolicy`. Unknown names list
``sorted(POLICIES)`` so the message never goes stale (STYLE.md rule 8).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from memcurator.errors import InvalidInput, UnknownName
from memcurator.policy.base import Params, Policy, Ranking, Verdict
from memcurator.policy.bundle import ComponentPolicy, normalize_spec
from memcurator.policy.presets import PRESETS, load_policy_file, resolve

#: The preset names (a live view of :data:`~memcurator.policy.presets.PRESETS`).
POLICIES = PRESETS


def register(name: str, spec: Mapping[str, Any]) -> None:
    """Add a preset from a spec (see :mod:`memcurator.policy.bundle`); ``base`` may name another.

    Raises
    ------
    InvalidInput
        ``name`` is empty, or the spec does not build (checked now, not at first use).
    """
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"policy name must be a non-empty string, got {name!r}")
    PRESETS[name] = dict(spec)
    try:
        ComponentPolicy(resolve(name), name=name)
    except Exception:
        del PRESETS[name]
        raise


def _slots(comp: Any, decision: str) -> list[dict[str, Any]]:
    """A component's spec and, depth first, the specs of components it wraps (e.g.
    ``quarantine``'s ``keep``, ``same-request-dedup``'s inner admit)."""
    from memcurator.policy.components import COMPONENTS

    if not isinstance(comp, dict) or "name" not in comp:
        return []
    out = [comp]
    for v in comp.values():
        if isinstance(v, dict) and v.get("name") in COMPONENTS[decision]:
            out += _slots(v, decision)
    return out


def _override(spec: dict[str, Any], key: str, value: Any) -> None:
    """Set one parameter: ``"decision.param"``, ``"estimator.param"`` or a unique bare name.

    A component that wraps another (``quarantine`` around a keep rule) exposes the wrapped
    one's parameters too: ``redundancy_delta`` reaches ``curator``'s ``rho-density`` inside
    its ``quarantine``.
    """
    from memcurator.policy.components import COMPONENTS, ESTIMATORS

    if "." in key:
        where, param = key.split(".", 1)
        if where in spec.get("estimators", {}) or where in ("rho", "worth"):
            spec.setdefault("estimators", {}).setdefault(where, {})[param] = value
            return
        if where in spec and isinstance(spec[where], dict):
            slots = _slots(spec[where], where) if where in COMPONENTS else [spec[where]]
            taking = [c for c in slots if _takes(COMPONENTS[where].factory(c["name"]), param)]
            (taking[0] if taking else spec[where])[param] = value
            return
        raise InvalidInput(f"no component or estimator {where!r} for parameter {key!r}")

    hits: list[tuple[str, Any]] = []
    for d in ("admit", "form", "keep", "rank", "share", "curate"):
        for comp in _slots(spec.get(d), d):
            if _takes(COMPONENTS[d].factory(comp["name"]), key):
                hits.append((d, comp))
    for comp in spec.get("learn", []):
        if _takes(COMPONENTS["learn"].factory(comp["name"]), key):
            hits.append(("learn", comp))
    for n in set(spec.get("estimators", {})) | _needed(spec):
        if _takes(ESTIMATORS.factory(n), key):
            hits.append((n, spec.setdefault("estimators", {}).setdefault(n, {})))
    if not hits:
        raise InvalidInput(f"no component of this policy takes a parameter {key!r}")
    if len(hits) > 1:
        names = [h[0] for h in hits]
        raise InvalidInput(
            f"parameter {key!r} is ambiguous ({names}); write e.g. '{names[0]}.{key}'"
        )
    hits[0][1][key] = value


def _takes(cls: Any, key: str) -> bool:
    import inspect

    return key in inspect.signature(cls.__init__).parameters and key != "self"


def _needed(spec: Mapping[str, Any]) -> set[str]:
    from memcurator.policy.components import COMPONENTS

    out: set[str] = set()
    for d in ("admit", "keep", "rank", "share", "curate"):
        comp = spec.get(d)
        if comp:
            out |= set(getattr(COMPONENTS[d].factory(comp["name"]), "needs", ()))
    for comp in spec.get("learn", []):
        out |= set(getattr(COMPONENTS["learn"].factory(comp["name"]), "needs", ()))
    return out


def policy_spec(name: str, **overrides: Any) -> dict[str, Any]:
    """The resolved, normalised spec of preset ``name`` with ``overrides`` applied.

    Raises
    ------
    UnknownName
        ``name`` is not a preset; the message lists the known names.
    InvalidInput
        An override names no parameter of the policy, or an ambiguous one.
    """
    try:
        spec = normalize_spec(resolve(name))
    except KeyError:
        raise UnknownName(f"unknown policy {name!r}; known: {sorted(PRESETS)}") from None
    spec = copy.deepcopy(spec)
    for k, v in overrides.items():
        _override(spec, k, v)
    return spec


def create_policy(name: str, **overrides: Any) -> ComponentPolicy:
    """Build a fresh policy from a preset name; ``overrides`` set component parameters.

    An override is ``param`` when exactly one component or estimator of the policy takes it,
    else ``"decision.param"`` (``"keep.redundancy_delta"``) or ``"estimator.param"``
    (``"worth.kappa"``).

    Raises
    ------
    UnknownName
        If ``name`` is not registered; the message lists the known names.
    InvalidInput
        A parameter no component takes, an ambiguous one, or a value a component refuses.

    Examples
    --------
    >>> create_policy("lru").name
    'lru'
    >>> create_policy("curator/no-provenance").estimator("rho").use_provenance
    False
    >>> create_policy("curator", theta=0.1).spec["admit"]
    {'name': 'trust-gate', 'theta': 0.1}
    """
    return ComponentPolicy(policy_spec(name, **overrides), name=name)


def policy_from_file(path: str, name: str | None = None) -> ComponentPolicy:
    """Build a policy defined in a TOML/JSON file (``name`` may be omitted if it holds one).

    Raises
    ------
    InvalidInput
        Unreadable file, or ``name`` missing / not in the file.
    """
    specs = load_policy_file(path)
    if name is None:
        if len(specs) != 1:
            raise InvalidInput(f"{path!r} defines {sorted(specs)}; say which one")
        name = next(iter(specs))
    if name not in specs:
        raise InvalidInput(f"{path!r} defines {sorted(specs)}, not {name!r}")
    return ComponentPolicy(specs[name], name=name)


__all__ = [
    "POLICIES",
    "ComponentPolicy",
    "Params",
    "Policy",
    "Ranking",
    "Verdict",
    "create_policy",
    "policy_from_file",
    "policy_spec",
    "register",
]
