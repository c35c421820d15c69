"""MemPilot's orchestrator as a curate component: per task, up to T_max steps of RETRIEVE or
CURATE, evidence appended, then stop; trained online by a CPU learner under preferences λ.

Dual view (Sec. 3.1): RETRIEVE(r, k) reads the **query-agnostic bank** through the memory's own
recall (whatever preset governs it) and returns each entry in a compressed, query-independent
form (its task and final action, the extractive distiller's view); CURATE(r, k, i, m) reads the
**raw history** (the raw trajectories, BM25 over task descriptions) and delegates curation with
instruction ``i`` to model ``m`` of the pool (:mod:`memcurator.curate.pool`). Controls are
factorised as in Eq. 6: action type z_t, query r_t, evidence count k_t, strategy i_t, model m_t
(no visual access v_t: the testbed is text-only). The action type and the model are one choice
(``retrieve`` or ``curate:<model>``), as the paper's policy emits the model after the action in
one sequence: with separate softmax factors, CURATE was credited with the average cost of every
model, and a cost-averse learner gave up curating with the free model because the priced ones
cost money. STOP is not allowed at the first step (App. A.1: an answer without any memory
action is invalid).

Cost and latency per task are MemPilot Eq. 14 and Eq. 17-19 over the curation calls (RETRIEVE
costs nothing, Sec. A.1); the orchestrator itself is a CPU policy, not an LLM, so its C_π and
L̂_π are 0 (its measured seconds are in ``mem s``).

Learning (Sec. 3.3, named as what it is): a factorised linear-softmax policy over task features
(:class:`~memcurator.curate.learner.SoftmaxChooser`) instead of a Qwen3-4B policy, REINFORCE
instead of clipped GRPO with KL (Eq. 11). On a training task G trajectories are sampled; each
gets quality Q (one probed execution of its final payload), cost C and latency proxy L;
advantages are decoupled per objective and combined with λ (Eq. 9-10); every step's choice is
credited ``A^λ + η Δu_t`` where ``u_t`` is the probed quality of the evidence prefix after step t
(Eq. 12-13, App. A.3). Probes are excluded from cost and latency (App. A.1) and counted apart.
The deployed trajectory is the greedy one (App. A.4: one deterministic trajectory per question).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from memcurator.curate.aligners import create_aligner
from memcurator.curate.base import (
    CallRecord,
    CurateContext,
    CurateResult,
    calls_cost,
    calls_proxy_s,
)
from memcurator.curate.extractive import (
    ParsedTrajectory,
    extract_noted,
    pair,
    pair_steps,
    parse_schema,
)
from memcurator.curate.features import FEATURES, task_features
from memcurator.curate.learner import SoftmaxChooser, gdpo_advantages, marginal_credit
from memcurator.curate.llm import STRATEGIES, curate_with_model, curator_prompt
from memcurator.curate.pool import ModelPool, default_pool
from memcurator.curate.retrieval import TaskIndex, raw_top_k
from memcurator.errors import InvalidInput
from memcurator.policy.components import Component
from memcurator.types import Entry

log = logging.getLogger(__name__)

CURATE_STRATEGIES: tuple[str, ...] = ("align", *STRATEGIES)
"""``align``: the extractive literal/schema alignment; the others are LLM instructions (on an
extractive or expert-sim model every strategy runs ``align``)."""
QUERIES: tuple[str, ...] = ("task", "task+table")


@dataclass
class Step:
    """One orchestration step: the chosen controls and the features they were chosen on."""

    choice: dict[str, str]
    x: dict[str, float]
    evidence: str = ""


@dataclass
class Rollout:
    """One orchestration trajectory τ (Eq. 4) and its resources."""

    steps: list[Step] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    sources: list[Entry] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw_chars: int = 0
    llm_evidence: bool = False

    def payload(self, upto: int | None = None, max_chars: int = 1200) -> str:
        """Evidence of the first ``upto`` steps (all by default), joined, cut at ``max_chars``."""
        ev = [s.evidence for s in self.steps[:upto] if s.evidence]
        out: list[str] = []
        for e in ev:
            if e not in out:
                out.append(e)
        return "\n\n".join(out)[:max_chars]

    @property
    def cost(self) -> float:
        """C(τ), Eq. 14 over the delegated calls, USD."""
        return calls_cost(self.calls)

    @property
    def proxy(self) -> float:
        """L̂_ext(τ), Eq. 18 over the delegated calls, seconds."""
        return calls_proxy_s(self.calls)

    def plan(self) -> str:
        """A readable plan, e.g. ``retrieve(k=1)|curate(local,adapt,k=3)``."""
        parts = []
        for s in self.steps:
            c = s.choice
            if c["z"] == "retrieve":
                parts.append(f"retrieve(k={c['k']})")
            elif c["z"] == "curate":
                parts.append(f"curate({c['model']},{c['strategy']},k={c['k']})")
        return "|".join(parts) or "stop"


class MemPilotOrchestrator(Component):
    """MemPilot's read-time orchestrator (decision ``curate``).

    Parameters
    ----------
    lam_cost, lam_latency : float, default 0.5, 0.5
        Preference λ = (1, λ_C, λ_L) (λ_Q = 1 throughout, Sec. 3.3).
    t_max : int, default 3
        Most orchestration steps per task (App. A.4 allows 6 rounds; a 270M executor reads
        short contexts best).
    k_options : list of int, default (1, 3)
        Evidence counts k_t the policy chooses among (App. A.4: at most 5 per call).
    strategies : list of str, default all of :data:`CURATE_STRATEGIES`
    models : list of str or None, default None
        Pool models the policy may delegate to (None: the whole pool).
    plan : list of dict or None, default None
        A fixed pipeline instead of a learned policy, e.g.
        ``[{"z": "retrieve", "k": 1}]``; no learning then.
    group_size : int, default 4
        G sampled trajectories per training task (App. A.5, Table 5: G = 4).
    train_every : int, default 3
        Train on every n-th task that offers a probe (each training task costs up to
        G (t_max + 1) probed executions, fewer with repeated payloads).
    eta : float, default 0.5
        Weight η of the marginal credit (Eq. 13; App. A.5: 0.5).
    lr : float, default 0.2
        REINFORCE step size of the CPU policy (0.5 locked in the first lucky choice on a
        simulated 0.57-vs-0.62 bandit more often: ``tests/test_readtime_curate.py``).
    max_payload_chars, max_tokens : int, default 1200, 96
    judge : bool, default False
        Ask the executor to judge trajectories before writing (not part of MemPilot).
    seed : int, default 0

    Raises
    ------
    InvalidInput
        Negative preferences, ``t_max < 1``, empty or bad k options, unknown strategies, a plan
        step with an unknown action.
    """

    decision = "curate"

    def __init__(
        self,
        lam_cost: float = 0.5,
        lam_latency: float = 0.5,
        t_max: int = 3,
        k_options: list[int] | tuple[int, ...] = (1, 3),
        strategies: list[str] | tuple[str, ...] = CURATE_STRATEGIES,
        models: list[str] | None = None,
        plan: list[dict[str, Any]] | None = None,
        group_size: int = 4,
        train_every: int = 3,
        eta: float = 0.5,
        lr: float = 0.2,
        max_payload_chars: int = 1200,
        max_tokens: int = 96,
        judge: bool = False,
        seed: int = 0,
    ):
        self.lam_cost = lam_cost
        self.lam_latency = lam_latency
        self.t_max = t_max
        self.k_options = list(k_options)
        self.strategies = list(strategies)
        self.models = None if models is None else list(models)
        self.plan = None if plan is None else [dict(p) for p in plan]
        self.group_size = group_size
        self.train_every = train_every
        self.eta = eta
        self.lr = lr
        self.max_payload_chars = max_payload_chars
        self.max_tokens = max_tokens
        self.judge = judge
        self.seed = seed
        if lam_cost < 0 or lam_latency < 0:
            raise InvalidInput("preferences lam_cost and lam_latency must be >= 0")
        if not isinstance(t_max, int) or t_max < 1:
            raise InvalidInput(f"t_max must be an integer >= 1, got {t_max!r}")
        if not self.k_options or any(not isinstance(k, int) or k < 1 for k in self.k_options):
            raise InvalidInput(f"k_options must be integers >= 1, got {k_options!r}")
        bad = [s for s in self.strategies if s not in CURATE_STRATEGIES]
        if bad or not self.strategies:
            raise InvalidInput(f"unknown strategies {bad}; known: {list(CURATE_STRATEGIES)}")
        for p in self.plan or []:
            if p.get("z") not in ("retrieve", "curate"):
                raise InvalidInput(f"a plan step needs z = 'retrieve' or 'curate', got {p!r}")
        if group_size < 0 or train_every < 1:
            raise InvalidInput("group_size must be >= 0 and train_every >= 1")
        self._pol: SoftmaxChooser | None = None
        self._pool_names: list[str] = []
        self._index = TaskIndex()
        self._seen = 0
        self.trained = 0

    @property
    def lam(self) -> tuple[float, float, float]:
        """λ = (λ_Q, λ_C, λ_L) with λ_Q = 1."""
        return (1.0, float(self.lam_cost), float(self.lam_latency))

    # --------------------------------------------------------------------- policy
    def _policy(self, pool: ModelPool) -> SoftmaxChooser:
        names = [n for n in pool.names if self.models is None or n in self.models]
        if not names:
            raise InvalidInput(f"none of the models {self.models} is in the pool {pool.names}")
        if self._pol is None or names != self._pool_names:
            self._pool_names = names
            acts = ["retrieve", *(f"curate:{n}" for n in names)]
            self._pol = SoftmaxChooser(
                {
                    "z0": acts,
                    "z": [*acts, "stop"],
                    "k": [str(k) for k in self.k_options],
                    "query": list(QUERIES),
                    "strategy": self.strategies,
                },
                FEATURES,
                lr=self.lr,
                seed=self.seed,
            )
        return self._pol

    def _choose(
        self, pol: SoftmaxChooser, x: dict[str, float], t: int, sample: bool
    ) -> dict[str, str]:
        if self.plan is not None:
            if t >= len(self.plan):
                return {"z": "stop"}
            p = self.plan[t]
            return {
                "z": str(p["z"]),
                "k": str(p.get("k", self.k_options[0])),
                "query": str(p.get("query", "task")),
                "strategy": str(p.get("strategy", "align")),
                "model": str(p.get("model", "local")),
            }
        first = "z0" if t == 0 else "z"
        pick = pol.sample if sample else pol.greedy
        act = pick(x, [first])[first]
        z, _, model = act.partition(":")
        out = {"z": z, "_zf": first, "_act": act}
        if z == "retrieve":
            out.update(pick(x, ["k", "query"]))
        elif z == "curate":
            out["model"] = model
            out.update(pick(x, ["k", "query", "strategy"]))
        return out

    # --------------------------------------------------------------------- actions
    def _query(self, ctx: CurateContext, which: str) -> str:
        if which == "task+table":
            table, cols = parse_schema(ctx.observation)
            return f"{ctx.task} {table} {' '.join(cols)}".strip()
        return ctx.task

    def _raw(self, ctx: CurateContext, query: str, k: int) -> list[Entry]:
        return raw_top_k(ctx, self._index, query, k)

    def _act(
        self, ctx: CurateContext, pool: ModelPool, c: dict[str, str], t: int, ro: Rollout
    ) -> str:
        k = int(c["k"])
        query = self._query(ctx, c["query"])
        aligner = create_aligner(ctx.domain)
        if c["z"] == "retrieve":
            ents = ctx.recall(query, k)
            ro.sources += ents
            views = []
            for m in ents:
                p = aligner.parse(m.text)
                if not (p and p.final_action):
                    views.append(m.text)
                elif aligner.whole_trajectory:
                    views.append(pair_steps(p.task, p.actions))
                else:
                    views.append(pair(p.task, p.final_action))
            return "\n\n".join(views)
        ents = self._raw(ctx, query, k)
        ro.raw_chars += sum(len(m.text) for m in ents)
        parsed: list[ParsedTrajectory] = [p for p in (aligner.parse(m.text) for m in ents) if p]
        if not parsed:
            ro.notes.append(f"step {t}: curate found no raw trajectory")
            return ""
        ro.sources += ents
        pm = pool[c["model"]]
        if not pm.uses_llm or c["strategy"] == "align":
            text, _, notes = extract_noted("align", ctx.task, ctx.observation, parsed, aligner)
            ro.notes += [f"step {t}: {n}" for n in notes]
            if pm.kind == "expert-sim":
                # billed as a priced expert reading the same evidence (characters / 4 tokens)
                prompt = curator_prompt(
                    "adapt", ctx.task, ctx.observation, parsed, domain=ctx.domain
                )
                n_in, n_out = len(prompt) // 4, max(1, len(text) // 4)
                ro.calls.append(
                    CallRecord(pm.name, n_in, n_out, pm.cost(n_in, n_out), 0.0,
                               pm.proxy(n_in, n_out), stage=t)
                )  # fmt: skip
            elif pm.uses_llm:
                pass  # "align" on an LLM: no call needed
            return text
        payload, why, rec = curate_with_model(
            pm,
            ctx,
            c["strategy"],
            parsed,
            max_tokens=self.max_tokens,
            max_chars=self.max_payload_chars,
            stage=t,
        )
        ro.calls.append(rec)
        if payload:
            ro.llm_evidence = True
            return payload
        note = f"step {t}: curate({pm.name},{c['strategy']}): {why}; fell back to align"
        log.info("MemPilot: %s (task %.60r)", note, ctx.task)
        ro.notes.append(note)
        text, _, notes = extract_noted("align", ctx.task, ctx.observation, parsed, aligner)
        ro.notes += [f"step {t}: {n}" for n in notes]
        return text

    def rollout(self, ctx: CurateContext, pool: ModelPool, sample: bool) -> Rollout:
        """One orchestration trajectory: choose, act, append evidence, until STOP or T_max."""
        pol = self._policy(pool)
        parsed0 = [
            p
            for p in (
                create_aligner(ctx.domain).parse(m.text)
                for m in self._raw(ctx, ctx.task, max(self.k_options))
            )
            if p
        ]
        ro = Rollout()
        for t in range(self.t_max):
            x = task_features(ctx.task, ctx.observation, parsed0, k=max(self.k_options), step=t,
                              t_max=self.t_max, evidence=len(ro.steps))  # fmt: skip
            c = self._choose(pol, x, t, sample)
            if c["z"] == "stop":
                if self.plan is None:
                    ro.steps.append(Step(c, x))
                break
            ev = self._act(ctx, pool, c, t, ro)
            ro.steps.append(Step(c, x, ev))
        return ro

    # --------------------------------------------------------------------- component API
    def curate(self, ctx: CurateContext) -> CurateResult:
        """Deploy the greedy trajectory; on a training task, also sample G and learn."""
        pool = ctx.pool if ctx.pool is not None else default_pool()
        ro = self.rollout(ctx, pool, sample=False)
        payload = ro.payload(max_chars=self.max_payload_chars)
        notes = list(ro.notes)
        if ctx.bank is not None and not ctx.bank():
            notes.insert(0, "empty bank: no payload")
        self._seen += 1
        probes = 0
        if (
            self.plan is None
            and self.group_size >= 2
            and ctx.probe is not None
            and (self._seen - 1) % self.train_every == 0
            and not (ctx.bank is not None and not ctx.bank())
        ):
            probes = self._train(ctx, pool)
        srcs = list({m.id: m for m in ro.sources}.values())
        return CurateResult(
            payload,
            source_ids=[m.id for m in srcs],
            sources=srcs,
            operator=ro.plan(),
            raw_chars=ro.raw_chars,
            calls=ro.calls,
            probe_calls=probes,
            notes=notes,
            header="Notes from memory:" if ro.llm_evidence else "Solved examples from memory:",
        )

    def _train(self, ctx: CurateContext, pool: ModelPool) -> int:
        probe = ctx.probe
        if probe is None:
            return 0
        cache: dict[str, float] = {}
        calls = 0

        def q(payload: str) -> float:
            nonlocal calls
            if payload not in cache:
                cache[payload] = float(probe(payload))
                calls += 1
            return cache[payload]

        group = [self.rollout(ctx, pool, sample=True) for _ in range(self.group_size)]
        calls += sum(sum(1 for c in ro.calls if c.ok and pool[c.model].uses_llm) for ro in group)
        quality = [q(ro.payload(max_chars=self.max_payload_chars)) for ro in group]
        adv = gdpo_advantages(
            quality, [ro.cost for ro in group], [ro.proxy for ro in group], self.lam
        )
        pol = self._policy(pool)
        for ro, a in zip(group, adv, strict=True):
            acted = [s for s in ro.steps if s.choice["z"] != "stop"]
            u = [q("")] + [q(ro.payload(upto=t + 1, max_chars=self.max_payload_chars))
                           for t in range(len(acted))]  # fmt: skip
            du = marginal_credit(u)
            for t, s in enumerate(ro.steps):
                credit = float(a) + (self.eta * float(du[t]) if t < len(du) else 0.0)
                ch = {s.choice["_zf"]: s.choice["_act"]}
                for f in ("k", "query", "strategy"):
                    if f in s.choice:
                        ch[f] = s.choice[f]
                pol.learn_one(s.x, ch, credit)
        self.trained += 1
        return calls

    def learn_outcome(self, reward: float) -> None:
        """MemPilot learns from its sampled group (probes), not from the deployed outcome."""

    def choice_probs(self, x: dict[str, float], factor: str) -> dict[str, float]:
        """The learned distribution of one factor for features ``x`` (after the first task).

        ``factor`` is ``"z0"`` (first action: ``retrieve`` or ``curate:<model>``), ``"z"``
        (later actions, with ``stop``), ``"k"``, ``"query"``, ``"strategy"``, or ``"model"``:
        the first step's distribution over pool models given that it curates.
        """
        if self._pol is None:
            return {}
        if factor == "model":
            acts = self._pol.factors["z0"]
            p = self._pol.probs("z0", x)
            cur = {a.split(":", 1)[1]: float(v) for a, v in zip(acts, p, strict=True)
                   if a.startswith("curate:")}  # fmt: skip
            tot = sum(cur.values())
            return {m: v / tot for m, v in cur.items()} if tot > 0 else cur
        p = self._pol.probs(factor, x)
        return {o: float(v) for o, v in zip(self._pol.factors[factor], p, strict=True)}

    def state(self) -> dict[str, Any]:
        if self._pol is None or self.plan is not None:
            return {}
        return {"policy": self._pol.state(), "models": self._pool_names}

    def load_state(self, state: Any) -> None:
        if "policy" in state and "models" in state:
            pool = default_pool()
            names = list(state["models"])
            if all(n in pool for n in names):
                self._policy(pool)
                # the action rows are named by the models: another restriction's rows would
                # hand one model's weights to another
                if self._pol is not None and names == self._pool_names:
                    self._pol.load_state(state["policy"])


__all__ = ["CURATE_STRATEGIES", "QUERIES", "MemPilotOrchestrator", "Rollout"]
