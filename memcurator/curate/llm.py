"""JitMem's LLM curator and LLM-as-judge write gate, over any executor of the model pool.

Prompts. JitMem's curator prompt is in its Appendix A, which our copy of the paper lacks; the
prompts below follow Sec. 3's description ("a concise briefing that identifies the most relevant
past experiences, extracts strategies that worked on similar tasks, and provides specific
guidance for the current task"), shaped for the SQL testbed: the payload is a SQL line the
executor can copy. ``STRATEGIES`` are the instructions a learned choice or MemPilot's ``i_t``
(Sec. 3.2) selects among.

Every call is accounted (:class:`~memcurator.curate.base.CallRecord`: tokens, MemPilot Eq. 14
cost, measured seconds and Eq. 17 proxy). An endpoint error or timeout is a
:class:`~memcurator.errors.LLMError`, which :func:`call_model` turns into a failed record and an
empty text: the caller falls back (logged) and the task goes on.

References
----------
JitMem, Sec. 3 ("Memory Curator", "Memory Bank": the executor as LLM-as-judge gates the bank).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from memcurator.curate.base import CallRecord, CurateContext
from memcurator.curate.extractive import ParsedTrajectory
from memcurator.curate.pool import PoolModel
from memcurator.errors import InvalidInput, LLMError
from memcurator.retrieve.bm25 import tokenize

log = logging.getLogger(__name__)

STRATEGIES: dict[str, str] = {
    "brief": (
        "You are a memory curator. Read the current task and the past solved examples. "
        "Write a short briefing for the agent: the most relevant past example and how its SQL "
        "must change for the current task (table, columns, values). At most 3 lines."
    ),
    "adapt": (
        "You are a memory curator. Rewrite the SQL of the most relevant past example so that it "
        "solves the current task: same pattern, the current table, columns and values. "
        "Answer with one line of SQL only."
    ),
}


#: The same prompts for bash tasks (``CurateContext.domain == "bash"``): the exemplar is a
#: multi-step trajectory of scripts and the task names users, groups, paths and modes.
BASH_STRATEGIES: dict[str, str] = {
    "brief": (
        "You are a memory curator. Read the current task and the past solved examples. "
        "Write a short briefing for the agent: the most relevant past example and how its bash "
        "commands must change for the current task (users, groups, paths, modes, counts). "
        "At most 3 lines."
    ),
    "adapt": (
        "You are a memory curator. Rewrite the bash commands of the most relevant past example "
        "so that they solve the current task: same commands, the current names, paths and "
        "values. Answer with one line of bash only."
    ),
}
_BY_DOMAIN = {"sql": STRATEGIES, "bash": BASH_STRATEGIES}


def render_trajectories(parsed: list[ParsedTrajectory], labels: list[str] | None = None) -> str:
    """The k retrieved trajectories, delimited by lightweight separators (JitMem Sec. 3)."""
    out = []
    for i, p in enumerate(parsed):
        lab = f" ({labels[i]})" if labels and labels[i] else ""
        body = [f"Task: {p.task}"]
        for o, a in zip(p.observations, p.actions, strict=False):
            body += [f"Observation: {o}", f"Action: {a}"]
        out.append(f"### Past example {i + 1}{lab}\n" + "\n".join(body))
    return "\n".join(out)


def curator_prompt(
    strategy: str,
    task: str,
    observation: str,
    parsed: list[ParsedTrajectory],
    labels: list[str] | None = None,
    *,
    domain: str = "sql",
) -> str:
    """The curator's structured prompt: instruction, current task, then the k trajectories.

    ``domain`` picks the wording (:data:`STRATEGIES` for ``"sql"``, :data:`BASH_STRATEGIES`
    for ``"bash"``); another domain gets the SQL wording.

    Raises
    ------
    InvalidInput
        Unknown strategy.
    """
    if strategy not in STRATEGIES:
        raise InvalidInput(f"unknown curation strategy {strategy!r}; known: {sorted(STRATEGIES)}")
    wording = _BY_DOMAIN.get(domain, STRATEGIES)
    past = render_trajectories(parsed, labels)
    # "adapt" ends in the pattern of the examples, so even a small completion model continues
    # with one SQL line (measured with Gemma-3-270M: a "### Briefing" ending gave repeated
    # filler lines sharing no word with the task, which the payload check refuses)
    end = "Action:" if strategy == "adapt" else "### Briefing\n"
    return (
        f"{wording[strategy]}\n\n{past}\n\n### Current task\nObservation: {observation}\n"
        f"Task: {task}\n{end}"
    )


def finish_payload(strategy: str, task: str, text: str) -> str:
    """The payload from a curator's raw output: ``adapt`` gives one SQL line, returned as the
    ``Task:/Action:`` pair the executor copies; ``brief`` is kept as written.

    Examples
    --------
    >>> finish_payload("adapt", "count t", " SELECT COUNT(*) FROM t;\\nmore")
    'Task: count t\\nAction: SELECT COUNT(*) FROM t;'
    >>> finish_payload("adapt", "count t", "  ")
    ''
    """
    if strategy != "adapt":
        return text
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.strip("`").strip()
    return f"Task: {task}\nAction: {line}" if line else ""


def stops_for(strategy: str) -> list[str] | None:
    """Stop sequences of a strategy's call (``adapt``: end of the SQL line)."""
    return ["\n\n", "\nTask:", "###"] if strategy == "adapt" else None


_PRINTABLE = re.compile(r"[\x20-\x7e\t\n\u00a0-\uffff]")


def check_payload(text: str, task: str, sources: str, max_chars: int) -> tuple[str, str]:
    """Accept or refuse a curator's output.

    A payload is kept when, stripped, it is non-empty, at least 95% printable, and shares at
    least one word with the task or the retrieved trajectories (grounded); it is cut at
    ``max_chars``. Returns ``(payload, "")`` or ``("", reason)``.

    Examples
    --------
    >>> check_payload("  ", "count rows", "", 100)
    ('', 'empty output')
    >>> check_payload("\\x00\\x01\\x02zz", "count rows", "", 100)[1]
    'garbage output (not text)'
    >>> check_payload("Use SELECT COUNT(*) FROM t;", "count rows of t", "", 100)[0]
    'Use SELECT COUNT(*) FROM t;'
    """
    t = (text or "").strip()
    if not t:
        return "", "empty output"
    printable = len(_PRINTABLE.findall(t)) / len(t)
    if printable < 0.95:
        return "", "garbage output (not text)"
    words = set(tokenize(t))
    if not words & (set(tokenize(task)) | set(tokenize(sources))):
        return "", "garbage output (shares no word with the task or the memory)"
    return t[:max_chars], ""


def call_model(
    model: PoolModel,
    agent_executor: Any,
    prompt: str,
    *,
    max_tokens: int,
    stage: int = 0,
    stop: list[str] | None = None,
) -> tuple[str, CallRecord]:
    """One accounted call to a pool model; an endpoint error gives ``("", failed record)``.

    Returns
    -------
    (str, CallRecord)
        The text ("" on failure) and the call's tokens, Eq. 14 cost, measured and Eq. 17 proxy
        seconds.

    Raises
    ------
    InvalidInput
        ``model`` is not an LLM (extractive or expert-sim) or bad arguments.
    """
    if not model.uses_llm:
        raise InvalidInput(f"model {model.name!r} ({model.kind}) is not a language model")
    ex = model.executor(agent_executor)
    try:
        c = ex.complete(prompt, max_tokens=max_tokens, stop=stop)
    except LLMError as e:
        log.info("curation call to %s failed: %s", model.name, e)
        return "", CallRecord(model.name, stage=stage, ok=False)
    cost = float(c.cost_usd) if model.kind == "openai" else model.cost(c.tokens_in, c.tokens_out)
    return c.text, CallRecord(
        model.name,
        tokens_in=int(c.tokens_in),
        tokens_out=int(c.tokens_out),
        cost_usd=cost,
        latency_s=float(c.latency_s),
        proxy_s=model.proxy(c.tokens_in, c.tokens_out),
        stage=stage,
    )


# ----------------------------------------------------------------------------- judge
JUDGE_PROMPT = (
    "You check an agent's work. Read the task, the SQL it ran and what the database returned. "
    "Did the SQL do what the task asks? Answer YES or NO.\n\n"
    "Task: {task}\n{observation}\nSQL: {sql}\nResult: {result}\nAnswer (YES or NO):"
)

#: The judge's prompt for a bash trajectory (``judge(..., domain="bash")``).
BASH_JUDGE_PROMPT = (
    "You check an agent's work. Read the task, the bash commands it ran and what the system "
    "printed. Did the commands do what the task asks? Answer YES or NO.\n\n"
    "Task: {task}\n{observation}\nCommands: {sql}\nResult: {result}\nAnswer (YES or NO):"
)

_YES = re.compile(r"\b(yes|success|successful|correct)\b", re.IGNORECASE)
_NO = re.compile(r"\b(no|fail|failed|failure|incorrect|wrong)\b", re.IGNORECASE)


def curate_with_model(
    model: PoolModel,
    ctx: CurateContext,
    strategy: str,
    parsed: list[ParsedTrajectory],
    labels: list[str] | None = None,
    *,
    max_tokens: int,
    max_chars: int,
    stage: int = 0,
) -> tuple[str, str, CallRecord]:
    """One LLM curation of ``parsed`` for ``ctx.task``: the strategy's prompt, one accounted
    call (:func:`call_model`), the payload finished and checked against the trajectories.

    Parameters
    ----------
    model : PoolModel
        The pool's language model to call (``ctx.executor`` is the pool's ``"local"``).
    ctx : CurateContext
        Reads ``task``, ``observation``, ``domain`` and ``executor``.
    strategy : str
        A key of :data:`STRATEGIES` (``"brief"``, ``"adapt"``).
    parsed, labels :
        The trajectories and their labels, as :func:`curator_prompt` takes them.
    max_tokens : int
        Completion tokens of the call.
    max_chars : int
        The longest payload :func:`check_payload` accepts (characters).
    stage : int, default 0
        The call's stage in its record.

    Returns
    -------
    (payload, why, CallRecord)
        ``payload`` is "" when the output is refused or the call failed; ``why`` then says why.

    Raises
    ------
    InvalidInput
        ``model`` is not a language model, or an unknown strategy.
    """
    prompt = curator_prompt(strategy, ctx.task, ctx.observation, parsed, labels, domain=ctx.domain)
    out, rec = call_model(
        model, ctx.executor, prompt, max_tokens=max_tokens, stage=stage, stop=stops_for(strategy)
    )
    out = finish_payload(strategy, ctx.task, out)
    if not rec.ok:
        return "", f"curator call to {model.name!r} failed", rec
    sources = "\n".join(p.task + " " + " ".join(p.actions) for p in parsed)
    payload, why = check_payload(out, ctx.task, sources, max_chars)
    return payload, why, rec


def parse_verdict(text: str) -> bool | None:
    """YES → True, NO → False, anything else (or both) → None.

    Examples
    --------
    >>> parse_verdict(" YES."), parse_verdict("no"), parse_verdict("SELECT 1;")
    (True, False, None)
    """
    y, n = _YES.search(text or ""), _NO.search(text or "")
    if y and not n:
        return True
    if n and not y:
        return False
    if y and n:
        return y.start() < n.start()
    return None


def judge(
    executor: Any,
    task: str,
    observation: str,
    sql: str,
    result: str,
    *,
    max_tokens: int = 4,
    domain: str = "sql",
) -> tuple[bool | None, Any]:
    """The executor as LLM-as-judge of success (JitMem Sec. 3, "Memory Bank").

    The judge sees the task, the schema, the SQL and its execution output; never the checker's
    verdict. Returns ``(verdict or None if unreadable or the call failed, Completion or None)``.
    ``domain="bash"``: ``sql`` is the trajectory's commands and ``result`` what the last one
    printed (:data:`BASH_JUDGE_PROMPT`).
    """
    template = BASH_JUDGE_PROMPT if domain == "bash" else JUDGE_PROMPT
    prompt = template.format(task=task, observation=observation, sql=sql, result=result)
    try:
        c = executor.complete(prompt, max_tokens=max_tokens)
    except LLMError as e:
        log.info("judge call failed: %s", e)
        return None, None
    return parse_verdict(c.text), c


__all__ = [
    "BASH_JUDGE_PROMPT",
    "JUDGE_PROMPT",
    "BASH_STRATEGIES",
    "STRATEGIES",
    "call_model",
    "check_payload",
    "curate_with_model",
    "curator_prompt",
    "finish_payload",
    "stops_for",
    "judge",
    "parse_verdict",
    "render_trajectories",
]
