"""JitMem's read-time curator as a policy component (decision ``curate``).

Per task (JitMem Sec. 3): **Retrieve** the top-k raw trajectories (BM25 over task
descriptions only, :class:`~memcurator.curate.retrieval.TaskIndex`, over the resident entries),
**Curate** a compact task-conditioned payload with one operator, **Execute** (the agent loop),
**Update** (the agent records the trajectory; the ``judge-gate`` admit component keeps it only
if the executor-as-judge deemed it solved).

Operators: the extractive ones of :mod:`memcurator.curate.extractive` (``align``, ``closest``,
``multi``, ``none``; no LLM) and ``llm-<strategy>`` for the prompts of
:data:`memcurator.curate.llm.STRATEGIES` (``llm-brief``, ``llm-adapt``), run on a model of the
pool (``"local"``: the agent's executor, the bundled GGUF model by default; any endpoint listed in
the pool file). An LLM curator whose output is empty, garbage or whose endpoint fails falls back
to ``align`` and says so in the result's notes (and the log); ``align`` itself falls back to
``closest`` (the exemplar with its own task) when its adaptation is incomplete, inconsistent or
does not bind to the current schema, and says so the same way.

Learning to curate (``group_size`` G >= 2): the CPU stand-in for JitMem's GRPO
(:mod:`memcurator.curate.learner`). On a training task the deployed operator is sampled from a
softmax policy over task features, G - 1 other operators make candidate payloads, each is scored
by the same-task reward (``ctx.probe``: one execution checked by the environment, learning only),
the deployed one by the task's own outcome; ``A_i = r_i - mean r`` and one REINFORCE step follow.
Off training tasks the most probable operator is used.

References
----------
JitMem, Sec. 3 (pipeline, memory bank, retrieval, curator, curator training; Sec. 4.1: group
size 8). The retrieval depth k is reported in JitMem's Appendix A, absent from our copy: the
default k = 3 is our choice, and a parameter.
"""

from __future__ import annotations

import logging
from typing import Any

from memcurator.curate.aligners import create_aligner
from memcurator.curate.base import CallRecord, CurateContext, CurateResult
from memcurator.curate.extractive import OPERATORS as EXTRACTIVE
from memcurator.curate.extractive import ParsedTrajectory, extract_noted
from memcurator.curate.features import FEATURES, task_features
from memcurator.curate.learner import CuratorTrainer, GroupSample, SoftmaxChooser, group_advantages
from memcurator.curate.llm import STRATEGIES, curate_with_model
from memcurator.curate.pool import default_pool
from memcurator.curate.retrieval import TaskIndex, raw_top_k
from memcurator.errors import InvalidInput
from memcurator.policy.components import Component
from memcurator.types import Entry

log = logging.getLogger(__name__)

LLM_OPERATORS = tuple(f"llm-{s}" for s in STRATEGIES)
ALL_OPERATORS = (*EXTRACTIVE, *LLM_OPERATORS)


def judge_label(m: Entry) -> str:
    """``"judged success"`` / ``"judged failure"`` / ``""`` from an entry's ``meta["judge"]``."""
    j = m.meta.get("judge")
    if j is None:
        return ""
    return "judged success" if float(j) >= 0.5 else "judged failure"


def run_operator(
    operator: str,
    ctx: CurateContext,
    parsed: list[ParsedTrajectory],
    labels: list[str],
    *,
    model: str,
    max_chars: int,
    max_tokens: int,
    stage: int = 0,
) -> tuple[str, list[int], list[CallRecord], list[str]]:
    """Run one curation operator; returns payload, indices used, calls, notes (fallbacks).

    Raises
    ------
    InvalidInput
        Unknown operator, or a model name that is not in the pool.
    """
    aligner = create_aligner(ctx.domain)
    if operator in EXTRACTIVE:
        text, used, notes = extract_noted(operator, ctx.task, ctx.observation, parsed, aligner)
        for n in notes:
            log.info("JitMem curator: %s (task %.60r)", n, ctx.task)
        return text[:max_chars], used, [], notes
    if operator not in LLM_OPERATORS:
        raise InvalidInput(f"unknown curation operator {operator!r}; known: {list(ALL_OPERATORS)}")
    pool = ctx.pool if ctx.pool is not None else default_pool()
    pm = pool[model]
    payload, why, rec = curate_with_model(
        pm,
        ctx,
        operator[4:],
        parsed,
        labels,
        max_tokens=max_tokens,
        max_chars=max_chars,
        stage=stage,
    )
    if payload:
        return payload, list(range(len(parsed))), [rec], []
    note = f"{operator}: {why}; fell back to align"
    log.info("JitMem curator: %s (task %.60r)", note, ctx.task)
    text, used, more = extract_noted("align", ctx.task, ctx.observation, parsed, aligner)
    return text[:max_chars], used, [rec], [note, *more]


class JitMemCurator(Component):
    """JitMem's read-time curate component.

    Parameters
    ----------
    k : int, default 3
        Trajectories retrieved per task (JitMem App. A, absent from our copy; our choice).
    operators : list of str, default ("llm-brief",)
        Curation operators to choose among (see :data:`ALL_OPERATORS`); with one, no choice.
    model : str, default "local"
        Pool model for the ``llm-*`` operators (``"local"``: the agent's executor).
    group_size : int, default 0
        G candidate payloads per training task (JitMem Sec. 4.1 uses 8); 0 or 1: no learning.
    train_every : int, default 1
        Train on every n-th task that has a probe (probes cost executor calls).
    judge : bool, default True
        The agent asks the executor to judge each trajectory before it is written (JitMem's
        write gate; the ``judge-gate`` admit component reads the verdict).
    max_payload_chars : int, default 1200
        Longest payload.
    max_tokens : int, default 96
        Generated tokens per LLM curator call.
    lr : float, default 0.5
        Step size of the operator policy.
    seed : int, default 0

    Raises
    ------
    InvalidInput
        Unknown operators, ``k < 1``, ``group_size < 0``, ``train_every < 1``.

    Examples
    --------
    >>> from memcurator.curate.base import CurateContext
    >>> raw = ("Task: member 102 paid 75\\nObservation: Table pay(mid INT, amt INT)\\n"
    ...        "Action: INSERT INTO pay VALUES (102, 75);\\nOutcome: success")
    >>> import numpy as np
    >>> e = Entry("e1", "ns", "raw", raw, 100, 100, np.zeros(2, dtype=np.float32))
    >>> cur = JitMemCurator(operators=["align"])
    >>> r = cur.curate(CurateContext("member 205 paid 90", lambda q, k: [], bank=lambda: [e],
    ...                              observation="Table pay(mid INT, amt INT)"))
    >>> print(r.payload)
    Task: member 205 paid 90
    Action: INSERT INTO pay VALUES (205, 90);
    >>> r.source_ids, r.raw_chars > len(r.payload)
    (['e1'], True)
    """

    decision = "curate"

    def __init__(
        self,
        k: int = 3,
        operators: list[str] | tuple[str, ...] = ("llm-brief",),
        model: str = "local",
        group_size: int = 0,
        train_every: int = 1,
        judge: bool = True,
        max_payload_chars: int = 1200,
        max_tokens: int = 96,
        lr: float = 0.5,
        seed: int = 0,
    ):
        self.k = k
        self.operators = list(operators)
        self.model = model
        self.group_size = group_size
        self.train_every = train_every
        self.judge = judge
        self.max_payload_chars = max_payload_chars
        self.max_tokens = max_tokens
        self.lr = lr
        self.seed = seed
        bad = [o for o in self.operators if o not in ALL_OPERATORS]
        if bad or not self.operators:
            raise InvalidInput(
                f"unknown or no curation operators {bad}; known: {list(ALL_OPERATORS)}"
            )
        if not isinstance(k, int) or k < 1:
            raise InvalidInput(f"k must be an integer >= 1, got {k!r}")
        if group_size < 0 or train_every < 1:
            raise InvalidInput("group_size must be >= 0 and train_every >= 1")
        self._policy = SoftmaxChooser({"op": self.operators}, FEATURES, lr=lr, seed=seed)
        self._pending: dict[str, Any] | None = None
        self._seen = 0
        self._trainer: CuratorTrainer | None = None
        self._index = TaskIndex()

    def retrieve(self, ctx: CurateContext, query: str, k: int) -> list[Entry]:
        """Top-k raw trajectories by BM25 over task descriptions (the bank, else ``recall``).

        Only raw trajectories (:func:`~memcurator.curate.extractive.parse_raw`) compete: an
        entry without a ``Task:`` line never takes one of the ``k`` places (it used to, and
        was dropped after the cut, leaving fewer than ``k``).
        """
        return raw_top_k(ctx, self._index, query, k)

    @property
    def learns(self) -> bool:
        """True when the operator choice is learned (G >= 2 and more than one operator)."""
        return self.group_size >= 2 and len(self.operators) > 1

    def set_trainer(self, trainer: CuratorTrainer | None) -> None:
        """Hand every scored group to ``trainer`` (the GPU GRPO hook; see ``learner``)."""
        self._trainer = trainer

    def curate(self, ctx: CurateContext) -> CurateResult:
        """Retrieve, choose an operator, write the payload (never stored).

        Returns
        -------
        CurateResult
            An empty payload with a note for an empty bank or unparseable entries.
        """
        self._pending = None
        entries = self.retrieve(ctx, ctx.task, self.k)
        raw_chars = sum(len(m.text) for m in entries)
        if not entries:
            return CurateResult("", operator="none", notes=["empty bank: no payload"])
        parse = create_aligner(ctx.domain).parse
        pairs = [(m, parse(m.text)) for m in entries]
        good = [(m, p) for m, p in pairs if p is not None]
        if not good:
            return CurateResult(
                "", operator="none", raw_chars=raw_chars,
                notes=["no retrieved entry is a raw trajectory: no payload"],
            )  # fmt: skip
        ents = [m for m, _ in good]
        parsed = [p for _, p in good if p is not None]
        # the paper's store-all ablation shows each trajectory's (judge's) label to the curator
        labels = [judge_label(m) for m in ents]
        x = task_features(ctx.task, ctx.observation, parsed, k=self.k)
        self._seen += 1
        training = (
            self.learns and ctx.probe is not None and (self._seen - 1) % self.train_every == 0
        )
        op = self._policy.sample(x)["op"] if training else self._policy.greedy(x)["op"]

        def run(o: str, stage: int) -> tuple[str, list[int], list[CallRecord], list[str]]:
            return run_operator(
                o, ctx, parsed, labels, model=self.model, max_chars=self.max_payload_chars,
                max_tokens=self.max_tokens, stage=stage,
            )  # fmt: skip

        payload, used, calls, notes = run(op, 0)
        probe_calls = 0
        if training and ctx.probe is not None:
            probs = self._policy.probs("op", x)
            others = [o for o in self.operators if o != op]
            others.sort(key=lambda o: -probs[self.operators.index(o)])
            cands: list[dict[str, str]] = [{"operator": op, "payload": payload}]
            rewards: list[float | None] = [None]  # the deployed one: the task's own outcome
            seen: dict[str, float] = {}
            for o in others[: self.group_size - 1]:
                p, _, c2, _ = run(o, 1)
                probe_calls += sum(1 for c in c2 if c.ok)  # training curation calls
                if p == payload:
                    r: float | None = None  # same payload as the deployed one: same reward
                elif p in seen:
                    r = seen[p]
                else:
                    r = float(ctx.probe(p))
                    seen[p] = r
                    probe_calls += 1
                cands.append({"operator": o, "payload": p})
                rewards.append(r)
            self._pending = {"x": x, "task": ctx.task, "cands": cands, "rewards": rewards}
        return CurateResult(
            payload,
            source_ids=[ents[i].id for i in used],
            sources=[ents[i] for i in used],
            operator=op,
            raw_chars=raw_chars,
            calls=calls,
            probe_calls=probe_calls,
            notes=notes,
            header="Solved examples from memory:" if op in EXTRACTIVE else "Notes from memory:",
        )

    def learn_outcome(self, reward: float) -> None:
        """The deployed payload's same-task reward: completes the group, takes one step."""
        pend, self._pending = self._pending, None
        if pend is None:
            return
        rewards = [float(reward) if r is None else float(r) for r in pend["rewards"]]
        adv = group_advantages(rewards)
        for cand, a in zip(pend["cands"], adv, strict=True):
            self._policy.learn_one(pend["x"], {"op": cand["operator"]}, float(a))
        if self._trainer is not None:
            self._trainer.submit(
                GroupSample(pend["task"], dict(pend["x"]), pend["cands"], rewards, adv.tolist())
            )

    def operator_probs(self, x: dict[str, float]) -> dict[str, float]:
        """The learned operator distribution for features ``x``."""
        p = self._policy.probs("op", x)
        return {o: float(v) for o, v in zip(self.operators, p, strict=True)}

    def state(self) -> dict[str, Any]:
        return {"policy": self._policy.state()} if self.learns else {}

    def load_state(self, state: Any) -> None:
        if "policy" in state:
            self._policy.load_state(state["policy"])


__all__ = ["ALL_OPERATORS", "LLM_OPERATORS", "JitMemCurator", "judge_label", "run_operator"]
