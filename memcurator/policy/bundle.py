"""``ComponentPolicy``: a policy assembled from one component per decision.

The bundle is built from a *spec*, plain data that a preset or a TOML/JSON file provides::

    {
        "estimators": {"rho": {"lam": 1.0}},          # shared learned state, by name
        "admit": {"name": "rho-trust", "theta": 0.0},
        "form": {"name": "form", "kind": "raw"},
        "keep": {"name": "rho-density", "redundancy_delta": 0.85},
        "rank": {"name": "cosine+q", "beta_q": 0.5},
        "learn": [{"name": "rho-profile"}],           # any number of learners
        "share": {"name": "rho-share"},               # optional
        "bounded": true,                              # benchmark hint (see Policy.bounded)
        "description": "..."
    }

Missing decisions take the defaults of :data:`DEFAULT_SPEC` (admit all, raw form, newest first,
cosine rank, no learning, no share). Every estimator a component ``needs`` is built once, from
the spec's parameters for it (its defaults when the spec has none), and handed to each component
that needs it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Features, Policy, Ranking, StatUpdates, Verdict, Victims
from memcurator.policy.components import (
    DECISIONS,
    ESTIMATORS,
    Component,
    Form,
    check_params,
    create_component,
)
from memcurator.types import Entry

DEFAULT_SPEC: dict[str, Any] = {
    "estimators": {},
    "admit": {"name": "all"},
    "form": {"name": "form"},
    "keep": {"name": "newest"},
    "rank": {"name": "cosine"},
    "learn": [],
    "share": None,
    "curate": None,
    "bounded": True,
    "description": "",
}
_KEYS = set(DEFAULT_SPEC)


def normalize_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with defaults filled in and its shape checked; the input is not modified.

    Raises
    ------
    InvalidInput
        Unknown top-level keys, a component that is not a table with a ``name``, ``learn``
        that is not a list, or a spec that is not JSON-serialisable (it must be plain data).
    """
    if not isinstance(spec, Mapping):
        raise InvalidInput(f"a policy spec must be a table, got {type(spec).__name__}")
    extra = sorted(set(spec) - _KEYS)
    if extra:
        raise InvalidInput(f"unknown policy spec keys {extra}; known: {sorted(_KEYS)}")
    out = copy.deepcopy(DEFAULT_SPEC)
    for k, v in spec.items():
        out[k] = copy.deepcopy(v)
    learn = out["learn"]
    if isinstance(learn, Mapping):
        out["learn"] = [learn]
    elif not isinstance(learn, list):
        raise InvalidInput(f"'learn' must be a list of components, got {learn!r}")
    for d in ("admit", "form", "keep", "rank"):
        if not isinstance(out[d], Mapping) or "name" not in out[d]:
            raise InvalidInput(f"'{d}' must be a table with a 'name', got {out[d]!r}")
    if not isinstance(out["estimators"], Mapping):
        raise InvalidInput("'estimators' must be a table of name -> parameters")
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"a policy spec must be plain data (JSON-able): {e}") from None
    return out


class ComponentPolicy(Policy):
    """A policy that delegates each decision to its component.

    Parameters
    ----------
    spec : dict
        See the module docstring; validated by :func:`normalize_spec`.
    name : str, default "custom"
        The preset name (decision log, saved state).

    Raises
    ------
    InvalidInput
        A malformed spec, parameters a component or estimator does not take.
    UnknownName
        A component or estimator name that is not registered.

    Examples
    --------
    >>> pol = ComponentPolicy({"keep": {"name": "lru"}}, name="my-lru")
    >>> pol.components()["keep"]
    'lru'
    >>> pol.clone().spec == pol.spec
    True
    """

    def __init__(self, spec: Mapping[str, Any], name: str = "custom"):
        self.spec = normalize_spec(spec)
        self.name = name
        s = self.spec
        self._admit = create_component("admit", s["admit"])
        form = create_component("form", s["form"])
        assert isinstance(form, Form)
        self._form = form
        self._keep = create_component("keep", s["keep"])
        self._rank = create_component("rank", s["rank"])
        self._learn = [create_component("learn", c) for c in s["learn"]]
        self._share = create_component("share", s["share"]) if s["share"] else None
        self._curate = create_component("curate", s["curate"]) if s["curate"] else None
        needed: list[str] = []
        for c in self._all():
            for n in c.needs:
                if n not in needed:
                    needed.append(n)
        unknown = sorted(set(s["estimators"]) - set(ESTIMATORS))
        if unknown:
            raise InvalidInput(f"unknown estimators {unknown}; known: {sorted(ESTIMATORS)}")
        # estimators other estimators need (rho with q from worth needs worth), built first
        self._estimators: dict[str, Any] = {}
        for n in list(needed) + [n for n in s["estimators"] if n not in needed]:
            self._build_estimator(n, [])
        self.bounded = bool(s["bounded"])
        self.writes = bool(self._form.writes)
        self.form = str(self._form.kind)
        self.min_reward = float(self._form.min_reward)
        self.distills = bool(getattr(self._keep, "distills", False))
        self.redundancy_delta = getattr(self._keep, "redundancy_delta", None)
        self.recall_all = bool(getattr(self._rank, "recall_all", False))
        self.can_share = self._share is not None
        self.curator = self._curate
        self.probation = bool(getattr(self._admit, "probation", False))
        self.agreement = getattr(self._admit, "agreement", None)

    def _build_estimator(self, n: str, chain: list[str]) -> Any:
        if n in self._estimators:
            return self._estimators[n]
        if n in chain:
            raise InvalidInput(f"estimators depend on each other in a cycle: {chain + [n]}")
        params = dict(self.spec["estimators"].get(n) or {})
        check_params(ESTIMATORS.factory(n), params, f"estimator {n!r}")
        try:
            est = ESTIMATORS.create(n, **params)
        except TypeError as e:
            raise InvalidInput(f"estimator {n!r}: {e}") from None
        for dep in est.needs:
            self._build_estimator(dep, chain + [n])
        self._estimators[n] = est
        return est

    def _all(self) -> list[Component]:
        out: list[Component] = [self._admit, self._form, self._keep, self._rank, *self._learn]
        out += [c for c in (self._share, self._curate) if c is not None]
        return out

    # --- introspection ---------------------------------------------------------------
    def components(self) -> dict[str, str | list[str] | None]:
        """Decision -> component name (``learn`` a list), for listings."""
        s = self.spec
        out: dict[str, str | list[str] | None] = {}
        for d in DECISIONS:
            v = s.get(d)
            if d == "learn":
                out[d] = [c["name"] for c in (v or [])]
            else:
                out[d] = None if not v else str(v["name"])
        return out

    def get_params(self) -> dict[str, Any]:
        return {"spec": copy.deepcopy(self.spec), "name": self.name}

    def clone(self) -> ComponentPolicy:
        """A fresh copy with the same spec and name and no learned state."""
        return type(self)(self.spec, name=self.name)

    def __repr__(self) -> str:
        comps = ", ".join(f"{d}={v}" for d, v in self.components().items() if v not in (None, []))
        return f"ComponentPolicy({self.name!r}: {comps})"

    def estimator(self, name: str) -> Any:
        """The attached shared estimator ``name`` (``"rho"``, ``"worth"``).

        Raises
        ------
        InvalidInput
            The policy has no such estimator.
        """
        if name not in self._estimators:
            raise InvalidInput(
                f"policy {self.name!r} has no {name!r} estimator; it has {sorted(self._estimators)}"
            )
        return self._estimators[name]

    @property
    def scorer(self) -> Any:
        """CURATOR's scorer (the ``rho`` estimator's), for inspection."""
        return self.estimator("rho").scorer

    @property
    def learner(self) -> Any:
        """TokenWorth's fitted learner (the ``worth`` estimator's), for inspection."""
        return self.estimator("worth").learner

    def terms(self, entries: list[Entry], E: np.ndarray) -> Any:
        """All of ρ's terms for ``entries`` (rows of ``E``)."""
        return self.estimator("rho").terms(entries, E)

    # --- lifecycle -----------------------------------------------------------------
    def attach(self, dim: int) -> None:
        super().attach(dim)
        done: set[str] = set()

        def attach_est(n: str) -> None:
            if n in done:
                return
            est = self._estimators[n]
            for dep in est.needs:
                attach_est(dep)
            est.attach(dim, self._estimators)
            done.add(n)

        for n in self._estimators:
            attach_est(n)
        for c in self._all():
            c.bind(dim, self._estimators, self.name)

    def set_budget(self, max_bytes: int | None) -> None:
        """Hand the memory's byte budget to every estimator that reads it."""
        for est in self._estimators.values():
            if hasattr(est, "set_budget"):
                est.set_budget(max_bytes)

    def _at(self, step: int) -> None:
        for est in self._estimators.values():
            if hasattr(est, "step"):
                est.step = step

    def observe_query(self, e_q: np.ndarray) -> None:
        for c in self._learn:
            c.observe_query(e_q)  # type: ignore[attr-defined]

    def feedback(
        self, reward: float, injected: list[Entry], step: int, features: Features | None = None
    ) -> StatUpdates:
        self._at(step)
        updates: dict[str, dict[str, float]] = {}
        current = list(injected)
        for c in self._learn:
            new = c.feedback(reward, current, step, features)  # type: ignore[attr-defined]
            if new:
                updates.update(new)
                current = [_with_stats(m, new.get(m.id)) for m in current]
        return updates

    def observe_energy(self, eps: float) -> None:
        for c in self._learn:
            c.observe_energy(eps)  # type: ignore[attr-defined]

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        self._at(step)
        v = self._admit.admit(candidate, resident, E, step)  # type: ignore[attr-defined]
        return Verdict(bool(v[0]), float(v[1]), str(v[2]))

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        self._at(step)
        return np.asarray(self._keep.priority(entries, E, step), dtype=np.float64)  # type: ignore[attr-defined]

    def victims(
        self, entries: list[Entry], E: np.ndarray, step: int, changed: list[Entry] | None = None
    ) -> Victims:
        if changed is not None and getattr(self._keep, "incremental_victims", False):
            return list(self._keep.victims(entries, E, step, changed=changed))  # type: ignore[attr-defined]
        return list(self._keep.victims(entries, E, step))  # type: ignore[attr-defined]

    def evict_reason(self) -> str:
        return str(self._keep.evict_reason())  # type: ignore[attr-defined]

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking:
        self._at(step)
        return self._rank.rerank(candidates, cosine, e_q, step)  # type: ignore[attr-defined,no-any-return]

    def recallable(self, entries: list[Entry]) -> np.ndarray | None:
        fn = getattr(self._rank, "recallable", None)
        return None if fn is None else fn(entries)  # type: ignore[no-any-return]

    def set_oracle(self, oracle: Any) -> None:
        if hasattr(self._rank, "oracle"):
            self._rank.oracle = oracle

    @property
    def sketch(self) -> np.ndarray:
        if self._share is None:
            return super().sketch
        return np.asarray(self._share.sketch)  # type: ignore[attr-defined]

    def admission_sketch(self, E: np.ndarray) -> np.ndarray | None:
        rho = self._estimators.get("rho")
        if (
            rho is None
            or not hasattr(rho, "sketch_like")
            or "rho" not in getattr(self._admit, "needs", ())
        ):
            return None
        out = rho.sketch_like(E)
        return None if out is None else np.asarray(out)

    def share_terms(self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray) -> Any:
        if self._share is None:
            return super().share_terms(entries, E, sketch)
        return self._share.share_terms(entries, E, sketch)  # type: ignore[attr-defined]

    # --- persistence -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        st: dict[str, Any] = {
            "estimators": {n: e.state() for n, e in self._estimators.items()},
        }
        comp = {f"{i}": c.state() for i, c in enumerate(self._all()) if c.state()}
        if comp:
            st["components"] = comp
        return st

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state` returned; a state of another shape is ignored (the
        estimators start fresh), e.g. one saved before the component redesign."""
        for n, s in dict(state.get("estimators") or {}).items():
            if n in self._estimators:
                self._estimators[n].load_state(s)
        comps = self._all()
        for i, s in dict(state.get("components") or {}).items():
            if int(i) < len(comps):
                comps[int(i)].load_state(s)


def _with_stats(m: Entry, stats: dict[str, float] | None) -> Entry:
    if stats is None:
        return m
    c = copy.copy(m)
    c.stats = dict(stats)
    return c


__all__ = ["DEFAULT_SPEC", "ComponentPolicy", "normalize_spec"]
