"""A policy is a bundle of declared components, one per decision of the memory lifecycle.

========  ===========================================================  =========================
decision  what it answers                                              implementations (module)
========  ===========================================================  =========================
admit     may this entry become resident? -> :class:`Verdict`           :mod:`.admit`, :mod:`.edm`
form      what does :meth:`Memory.record` write (raw / insight)?       :class:`Form` (here)
keep      in what order do entries stay resident; what must go now?    :mod:`.keep`
rank      how are recall candidates ordered? -> :class:`Ranking`       :mod:`.rank`, :mod:`.edm`
learn     what is learned from queries, outcomes and energy?           :mod:`.learn`
share     what is sent to a peer under an uplink budget?               :mod:`.share`
curate    what payload is built at read time from recalled entries?    :mod:`memcurator.curate`
========  ===========================================================  =========================

Each component is a small :class:`Component` (parameters in ``__init__``, scikit-learn style) that
declares in ``needs`` the shared estimators it reads (``"rho"``, ``"worth"``; see
:mod:`memcurator.policy.estimators`). Components are registered by name in :data:`COMPONENTS`
(one :class:`~memcurator.registry.Registry` per decision), so a new keep or rank rule is one new
file plus one registration line, and presets are plain data
(:mod:`memcurator.policy.presets`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Features, Params, Ranking, StatUpdates, Verdict, Victims
from memcurator.registry import Registry
from memcurator.types import Entry

DECISIONS: tuple[str, ...] = ("admit", "form", "keep", "rank", "learn", "share", "curate")


class Component(Params):
    """Base of every component: parameters, the estimators it needs, optional state."""

    decision: ClassVar[str] = ""
    needs: tuple[str, ...] = ()

    def bind(self, dim: int, estimators: Mapping[str, Any], policy_name: str) -> None:
        """Called once when the policy is attached: the embedding dimension, the estimators
        named in ``needs`` and the preset name (for reasons in the decision log)."""
        self._dim = dim
        self._policy_name = policy_name
        missing = [n for n in self.needs if n not in estimators]
        if missing:
            raise InvalidInput(f"{type(self).__name__} needs estimators {missing}")
        self._est = {n: estimators[n] for n in self.needs}

    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` returned."""


# ------------------------------------------------------------------------------- protocols
@runtime_checkable
class AdmitComponent(Protocol):
    """``admit(candidate, resident, E, step) -> Verdict``; ``E`` has shape (n_resident, d)."""

    def admit(
        self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int
    ) -> Verdict: ...


@runtime_checkable
class KeepComponent(Protocol):
    """Keep order under the byte budget, plus evictions regardless of bytes.

    ``priority`` returns shape (n,), higher stays first (NaN ranks last); ``victims`` returns
    ``(id, score, reason)`` triples; ``distills`` offers a raw entry about to fall out to the
    distiller; ``redundancy_delta`` is the cosine floor of the rule that makes an outranked
    version of the same request the first victim.
    """

    distills: bool
    redundancy_delta: float | None

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray: ...

    def victims(self, entries: list[Entry], E: np.ndarray, step: int) -> Victims: ...

    def evict_reason(self) -> str: ...


@runtime_checkable
class RankComponent(Protocol):
    """``rerank(candidates, cosine, e_q, step) -> Ranking``; ``cosine`` has shape (n,)."""

    recall_all: bool

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking: ...


@runtime_checkable
class LearnComponent(Protocol):
    """What is learned: queries, task outcomes (returns ``{id: new stats}``), energy."""

    def observe_query(self, e_q: np.ndarray) -> None: ...

    def feedback(
        self, reward: float, injected: list[Entry], step: int, features: Features | None
    ) -> StatUpdates: ...

    def observe_energy(self, eps: float) -> None: ...


@runtime_checkable
class ShareComponent(Protocol):
    """CURATOR's Share: the sketch advertised to peers and the share terms against theirs."""

    @property
    def sketch(self) -> np.ndarray: ...

    def share_terms(self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray) -> Any: ...


@runtime_checkable
class CurateComponent(Protocol):
    """Read-time curation (JitMem, MemPilot): a task-conditioned payload, injected, never stored.

    ``curate(ctx) -> CurateResult`` reads the task and what it retrieves through ``ctx``
    (:class:`~memcurator.curate.base.CurateContext`: recall, the resident bank, the executor,
    the model pool, a learning probe); ``learn_outcome(reward)`` hands it the same-task reward
    of the deployed payload; ``judge`` asks the agent to have the executor judge each
    trajectory before it is written (JitMem's write gate, read by the ``judge-gate`` admit).
    """

    judge: bool

    def curate(self, ctx: Any) -> Any: ...

    def learn_outcome(self, reward: float) -> None: ...


PROTOCOLS: dict[str, type] = {
    "admit": AdmitComponent,
    "keep": KeepComponent,
    "rank": RankComponent,
    "learn": LearnComponent,
    "share": ShareComponent,
    "curate": CurateComponent,
}


# ------------------------------------------------------------------------------- form
class Form(Component):
    """What :meth:`Memory.record` writes for a finished task.

    Parameters
    ----------
    kind : {"raw", "insight"}, default "raw"
        The raw trajectory, or its distilled insight (``b⁰`` = the raw bytes).
    writes : bool, default True
        ``False`` writes nothing (the no-memory baseline).
    min_reward : float, default 0.5
        Only trajectories with at least this reward are written (every method here writes
        successful experience only; EDM's evaluation gate is an admit component on top).

    Raises
    ------
    InvalidInput
        Unknown ``kind`` or ``min_reward`` outside [0, 1].

    Examples
    --------
    >>> Form(kind="insight").kind
    'insight'
    """

    decision = "form"

    def __init__(self, kind: str = "raw", writes: bool = True, min_reward: float = 0.5):
        self.kind = kind
        self.writes = writes
        self.min_reward = min_reward
        if kind not in ("raw", "insight"):
            raise InvalidInput(f"form kind must be 'raw' or 'insight', got {kind!r}")
        if not 0.0 <= float(min_reward) <= 1.0:
            raise InvalidInput(f"min_reward must be in [0, 1], got {min_reward!r}")


# ------------------------------------------------------------------------------- registry
#: One registry per decision: component name -> class (lazy ``"module:Class"``).
COMPONENTS: dict[str, Registry[Component]] = {
    "admit": Registry(
        "admit component",
        {
            "all": "memcurator.policy.admit:AdmitAll",
            "none": "memcurator.policy.admit:AdmitNone",
            "rho-trust": "memcurator.policy.admit:RhoTrust",
            "same-request-dedup": "memcurator.policy.admit_dedup:SameRequestDedup",
            "worth-bank": "memcurator.policy.admit:WorthAdmission",
            "edm-gate": "memcurator.policy.edm:EvalGate",
            "trust-gate": "memcurator.policy.trust:TrustGate",
            "judge-gate": "memcurator.policy.jitmem:JudgeGate",
        },
    ),
    "form": Registry("form component", {"form": Form}),
    "keep": Registry(
        "keep component",
        {
            "newest": "memcurator.policy.keep:NewestFirst",
            "lru": "memcurator.policy.keep:LeastRecentlyUsed",
            "successes": "memcurator.policy.keep:MostSuccessful",
            "rho-density": "memcurator.policy.keep:RhoDensity",
            "rho-density-margin": "memcurator.policy.keep_margin:RhoDensityMargin",
            "probe-worth": "memcurator.policy.keep:ProbeWorth",
            "quarantine": "memcurator.policy.quarantine:Quarantine",
        },
    ),
    "rank": Registry(
        "rank component",
        {
            "cosine": "memcurator.policy.rank:CosineRank",
            "cosine+q": "memcurator.policy.rank:CosinePlusHelpfulness",
            "learned-worth": "memcurator.policy.rank:LearnedWorth",
            "oracle": "memcurator.policy.rank:OracleRank",
            "cosine*pei": "memcurator.policy.edm:CosineTimesPEI",
        },
    ),
    "learn": Registry(
        "learn component",
        {
            "rho-profile": "memcurator.policy.learn:RhoProfile",
            "worth": "memcurator.policy.learn:WorthLearning",
            "peer-reputation": "memcurator.policy.trust:PeerReputationLearn",
        },
    ),
    "share": Registry("share component", {"rho-share": "memcurator.policy.share:RhoShare"}),
    "curate": Registry(
        "curate component",
        {
            "jitmem": "memcurator.curate.jitmem:JitMemCurator",
            "mempilot": "memcurator.curate.mempilot:MemPilotOrchestrator",
        },
    ),
}

#: Shared estimators by name (see :mod:`memcurator.policy.estimators`).
ESTIMATORS: Registry[Any] = Registry(
    "estimator",
    {
        "rho": "memcurator.policy.estimators:RhoEstimator",
        "worth": "memcurator.policy.estimators:WorthEstimator",
        "reputation": "memcurator.policy.trust:ReputationEstimator",
    },
)


def check_params(cls: Any, params: Mapping[str, Any], what: str) -> None:
    """Refuse parameter values of the wrong kind before a component or estimator is built.

    A parameter whose default is a number, or whose annotation is ``float``/``int`` (optionally
    ``| None``), takes a finite real number (``None`` only where the annotation allows it); a
    parameter whose default is a bool takes a bool. Other parameters are the class's to check.
    A wrong value would otherwise surface as a numpy or comparison error at the first write.

    Raises
    ------
    InvalidInput
        Naming ``what``, the parameter and the value.

    Examples
    --------
    >>> class K:
    ...     def __init__(self, theta: float = 0.5, delta: float | None = None, flag=True): ...
    >>> check_params(K, {"theta": 1, "delta": None, "flag": False}, "keep 'k'")
    >>> check_params(K, {"theta": "abc"}, "keep 'k'")
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: keep 'k': parameter 'theta' must be a finite number, got 'abc'
    """
    import inspect

    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return
    for name, v in params.items():
        prm = sig.parameters.get(name)
        if prm is None:
            continue
        d, ann = prm.default, str(prm.annotation).replace(" ", "")
        if isinstance(d, bool):
            if not isinstance(v, bool):
                raise InvalidInput(f"{what}: parameter {name!r} must be true or false, got {v!r}")
            continue
        numeric = ann in ("float", "int", "float|None", "int|None", "None|float", "None|int")
        if not numeric and not (isinstance(d, (int, float)) and d is not prm.empty):
            continue
        if v is None and ("None" in ann or d is None):
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if ok and ann.startswith("int") and float(v) != int(v):
            ok = False
        if not ok:
            raise InvalidInput(f"{what}: parameter {name!r} must be a finite number, got {v!r}")


def create_component(decision: str, spec: Mapping[str, Any]) -> Component:
    """Build one component from ``{"name": ..., **params}``.

    Raises
    ------
    InvalidInput
        Unknown decision, a spec without ``name``, or parameters the component does not take.
    UnknownName
        ``name`` is not registered for ``decision``.
    """
    if decision not in COMPONENTS:
        raise InvalidInput(f"unknown decision {decision!r}; known: {sorted(COMPONENTS)}")
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise InvalidInput(f"{decision} component must be a table with a 'name', got {spec!r}")
    params = {k: v for k, v in spec.items() if k != "name"}
    cls = COMPONENTS[decision].factory(str(spec["name"]))
    check_params(cls, params, f"{decision} component {spec['name']!r}")
    try:
        comp = cls(**params)
    except TypeError as e:
        raise InvalidInput(f"{decision} component {spec['name']!r}: {e}") from None
    proto = PROTOCOLS.get(decision)
    if proto is not None:
        # checked on the class (a property such as ``sketch`` needs bound estimators to run)
        members = getattr(proto, "__protocol_attrs__", None) or [
            n for n in vars(proto) if not n.startswith("_")
        ]
        missing = [n for n in members if not (hasattr(type(comp), n) or n in vars(comp))]
        if missing:
            raise InvalidInput(
                f"{type(comp).__name__} does not implement the {decision} protocol: "
                f"missing {sorted(missing)}"
            )
    return comp


__all__ = [
    "COMPONENTS",
    "check_params",
    "DECISIONS",
    "ESTIMATORS",
    "AdmitComponent",
    "Component",
    "CurateComponent",
    "Form",
    "KeepComponent",
    "LearnComponent",
    "RankComponent",
    "ShareComponent",
    "create_component",
]
