"""What a read-time curator receives and returns: :class:`CurateContext`, :class:`CurateResult`.

A read-time curator (JitMem, MemPilot) runs once the task is known: it reads the task and
entries it recalls and writes a task-conditioned payload that is injected into the executor's
prompt and **never stored** (JitMem, Sec. 3: "the curated payload p_t is ephemeral").

References
----------
JitMem, Sec. 3 (Retrieve → Curate → Execute → Update). MemPilot, Sec. 3.1 (dual-view memory:
query-agnostic bank M and raw history H).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memcurator.types import Entry


@dataclass
class CallRecord:
    """One model call made while curating (or judging), with its accounting.

    Parameters
    ----------
    model : str
        Pool name of the model (``"local"``, ``"expert-sim"``, an endpoint's name).
    tokens_in, tokens_out : int, tokens
    cost_usd : float, USD
        MemPilot Eq. 14 for this call: ``1e-6 (p_in n_in + p_out n_out)``.
    latency_s : float, seconds
        Measured wall-clock (a cache hit replays the measured value).
    proxy_s : float, seconds
        MemPilot's affine latency proxy for this call (Eq. 17).
    stage : int
        Sequential stage index (MemPilot Eq. 18 takes the max within a stage, sums stages).
    ok : bool
        False when the call failed (timeout, HTTP error); its tokens are then 0.
    """

    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    proxy_s: float = 0.0
    stage: int = 0
    ok: bool = True


@dataclass
class CurateContext:
    """Everything a read-time curator may use for one task; collaborators are passed in.

    Parameters
    ----------
    task : str
        The task description x_t (the instruction).
    recall : callable (query: str, k: int, where=None) -> list of Entry
        The memory's own recall (BM25 + dense pool, the policy's rank): MemPilot's RETRIEVE
        from the query-agnostic bank. ``where`` (Entry -> bool) filters before the pool is
        cut (:meth:`memcurator.Memory.recall`); a curator without a bank passes it to get
        raw trajectories only.
    bank : callable () -> list of Entry, optional
        Every resident entry (copies), for a curator's own retriever (JitMem: BM25 over task
        descriptions only, :class:`~memcurator.curate.retrieval.TaskIndex`). None: no bank.
    observation : str, default ""
        What the agent sees before acting (SQL: the table schema line and example rows).
    executor : Executor or None
        The agent's executor (the bundled GGUF model in the bench); the pool's ``"local"``.
    pool : ModelPool or None
        Heterogeneous model pool (:mod:`memcurator.curate.pool`); None: a default pool around
        ``executor``.
    probe : callable (payload: str) -> float, or None
        Executes the task once with ``payload`` injected and returns the checker's reward in
        [0, 1]. **Learning only** (JitMem's GRPO reward, MemPilot's prefix probes, Eq. 12);
        never shown to the executor, never written to memory, excluded from cost and latency
        as in MemPilot App. A.1. None: the curator does not learn on this task.
    step : int, default 0
        The memory's logical step.
    domain : str, default "sql"
        The task domain, naming the aligner that parses and adapts its trajectories
        (:data:`memcurator.curate.aligners.ALIGNERS`: ``"sql"``, ``"bash"``) and the wording
        of the LLM curators' prompts.
    """

    task: str
    recall: Callable[..., list[Entry]]
    bank: Callable[[], list[Entry]] | None = None
    observation: str = ""
    executor: Any = None
    pool: Any = None
    probe: Callable[[str], float] | None = None
    step: int = 0
    domain: str = "sql"


@dataclass
class CurateResult:
    """A payload and how it was made.

    Attributes
    ----------
    payload : str
        The text injected into the prompt ("" when there is nothing to say).
    source_ids : list of str
        Ids of the entries the payload draws on (they get the task's feedback).
    sources : list of Entry
        Those entries (copies), aligned with ``source_ids``.
    operator : str
        The curation operator / plan that produced the payload (``"align"``, ``"llm-brief"``,
        ``"retrieve(k=1)|curate(local,brief,k=3)"``, ...).
    raw_chars : int
        Characters of the raw trajectories the curator read (injecting them whole would cost
        this much; JitMem's "payload tokens against raw injection").
    calls : list of CallRecord
        Curation model calls charged to the task.
    probe_calls : int
        Executor calls spent on learning probes (excluded from cost and latency).
    notes : list of str
        Fallbacks and their reasons (empty bank, empty or garbage output, endpoint error).
    header : str
        How the executor prompt introduces the payload.
    """

    payload: str
    source_ids: list[str] = field(default_factory=list)
    sources: list[Entry] = field(default_factory=list)
    operator: str = ""
    raw_chars: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    probe_calls: int = 0
    notes: list[str] = field(default_factory=list)
    header: str = "Solved examples from memory:"

    @property
    def cost_usd(self) -> float:
        """MemPilot Eq. 14 summed over the curation calls, USD."""
        return calls_cost(self.calls)

    @property
    def latency_s(self) -> float:
        """Measured seconds of the curation calls."""
        return float(sum(c.latency_s for c in self.calls))

    @property
    def proxy_s(self) -> float:
        """MemPilot Eq. 18 over the curation calls, seconds (:func:`calls_proxy_s`)."""
        return calls_proxy_s(self.calls)


def calls_cost(calls: list[CallRecord]) -> float:
    """C(τ), MemPilot Eq. 14: the calls' cost summed, USD."""
    return float(sum(c.cost_usd for c in calls))


def calls_proxy_s(calls: list[CallRecord]) -> float:
    """L̂_ext(τ), MemPilot Eq. 18: the calls' latency proxy, the largest within a stage (its
    calls run in parallel) summed over the stages, seconds."""
    stages: dict[int, float] = {}
    for c in calls:
        stages[c.stage] = max(stages.get(c.stage, 0.0), c.proxy_s)
    return float(sum(stages.values()))


__all__ = ["CallRecord", "CurateContext", "CurateResult", "calls_cost", "calls_proxy_s"]
