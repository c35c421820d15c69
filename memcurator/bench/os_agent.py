"""The OS agent loop: recall → prompt with injected memory → up to 5 ``Act: bash`` rounds in a
fresh sandbox → evaluation script → escalation to the expert on failure → feedback → write.

The episode follows upstream (:mod:`memcurator.envs.os.protocol`); the memory's unit is the
multi-step trajectory: one :class:`~memcurator.types.Step` per bash round (the observation
before it and the script), so a recalled entry shows the whole path, not one command.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from typing import Any

from memcurator.bench.agent import (
    MEMORY_HEADER,
    AgentConfig,
    TaskRecord,
    Usage,
    close_task,
    curate_context,
    payload_header,
    settle,
    show_memory,
    timed_probe,
)
from memcurator.curate.llm import judge
from memcurator.errors import ContextOverflow
from memcurator.memory import Memory
from memcurator.trust.provenance import unmark_reply, unspotlight
from memcurator.types import Step, Task

#: The model's reply ends at the close of its bash block or at the next turn's label.
STOP = ["\nOS:", "\nTask:"]


def render_prompt(history: list[tuple[str, str]], block: str, header: str = MEMORY_HEADER) -> str:
    """The conversation as one text prompt for a completion executor.

    ``history`` is the protocol's: the instruction, the task, then (agent reply, OS observation)
    pairs. The memory block sits between the instruction and the task, and the prompt ends with
    ``Agent:`` for the next reply.

    Examples
    --------
    >>> print(render_prompt([("user", "Rules."), ("user", "Make /x")], ""))
    Rules.
    <BLANKLINE>
    Task: Make /x
    Agent:
    """
    system, task, *turns = (text for _, text in history)
    mem = f"{header}\n{block}\n\n" if block else ""
    lines = [f"{system}\n\n{mem}Task: {task}"]
    for role, text in history[2:]:
        lines.append(("Agent: " if role == "agent" else "OS: ") + text)
    return "\n".join(lines) + "\nAgent:"


_LABEL = re.compile(r"^(Task|Observation|Action|Outcome): ?", re.MULTILINE)
_BLOCK = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)


def as_dialogue(text: str) -> str:
    """A remembered trajectory in the protocol's own turn format, as the model must answer.

    A stored trajectory (``Task:``, then ``Observation:``/``Action:`` steps, ``Outcome:``;
    :func:`memcurator.distill.render_raw`) or insight (``Task:``/``Action:``) becomes the
    conversation the agent would have had: each action an ``Act: bash`` reply with its script
    in a bash block, each later observation the ``OS:`` turn before the next reply, and a
    closing ``Act: finish``. Shown ``Action:`` lines, the 270M model answered with ``Action:``
    lines of its own, which the protocol cannot run (20 of 20 tasks, even with the reference
    solution injected). Text without a ``Task:`` line and an action is returned unchanged.
    Multi-line observations and scripts are kept whole (a label starts only at a line start).

    Examples
    --------
    >>> print(as_dialogue("Task: make /x\\nObservation: \\nAction: mkdir /x\\nOutcome: success"))
    Task: make /x
    Agent: Think: I solve it with bash.
    Act: bash
    ```bash
    mkdir /x
    ```
    Agent: Think: the task is done.
    Act: finish
    >>> as_dialogue("a plain note")
    'a plain note'
    """
    marks = list(_LABEL.finditer(text))
    parts = [
        (m.group(1), text[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)])
        for i, m in enumerate(marks)
    ]
    task = next((v.strip() for k, v in parts if k == "Task"), "")
    if not task or not any(k == "Action" for k, _ in parts):
        return text
    out = [f"Task: {task}"]
    obs, first = "", True
    for key, value in parts:
        if key == "Observation":
            obs = value.strip("\n")
        elif key == "Action":
            if obs.strip() and not first:
                out.append(f"OS: {obs}")
            think = "I solve it with bash." if first else "next step."
            out.append(f"Agent: Think: {think}\nAct: bash\n```bash\n{value.strip()}\n```")
            obs, first = "", False
    out.append("Agent: Think: the task is done.\nAct: finish")
    return "\n".join(out)


def copy_first_exemplar(prompt: str) -> str:
    """A scripted OS responder for smoke tests (``--executor fake``), never used in reports.

    Round one: run the first injected exemplar's last bash block (the SQL fake's copy rule);
    with nothing injected, or after a round, ``Act: finish``.

    Examples
    --------
    >>> p = "Rules\\n\\nSolved examples from memory:\\n" + as_dialogue("Task: a\\nAction: mkdir /x")
    >>> p += "\\n\\nTask: b\\nAgent:"
    >>> copy_first_exemplar(p)
    ' Think: copy the remembered solution.\\nAct: bash\\n```bash\\nmkdir /x\\n```'
    >>> copy_first_exemplar("Rules\\n\\nTask: b\\nAgent:")
    ' Think: nothing to go on.\\nAct: finish'
    """
    prompt = unspotlight(prompt)  # a credulous model reads spotlighted data as prompt
    if "\nOS: " in prompt.rsplit("\n\nTask: ", 1)[-1]:  # a round ran: the current task's turns
        return " Think: done.\nAct: finish"
    if MEMORY_HEADER not in prompt:
        return " Think: nothing to go on.\nAct: finish"
    mem = prompt.split(MEMORY_HEADER, 1)[1].rsplit("\n\nTask: ", 1)[0]
    first = mem.split("\n\nTask: ")[0]
    found = _BLOCK.findall(first)
    if not found:
        return " Think: nothing to go on.\nAct: finish"
    return f" Think: copy the remembered solution.\nAct: bash\n```bash\n{found[-1].strip()}\n```"


def dialogue_payload(payload: str) -> str:
    """A read-time curator's payload in the protocol's turn format: each ``Task:`` exemplar of
    it through :func:`as_dialogue`; notes (an LLM curator's briefing) are kept as written.

    Examples
    --------
    >>> a, b = "Task: a\\nAction: mkdir /a", "Task: b\\nAction: ls"
    >>> dialogue_payload(a + "\\n\\n" + b) == as_dialogue(a) + "\\n\\n" + as_dialogue(b)
    True
    >>> print(dialogue_payload("A note.\\n\\n" + b).split("Act: bash")[0])
    A note.
    <BLANKLINE>
    Task: b
    Agent: Think: I solve it with bash.
    <BLANKLINE>
    """
    return "\n\n".join(as_dialogue(part) for part in re.split(r"\n\n(?=Task: )", payload))


@dataclasses.dataclass
class Play:
    """One episode of the OS protocol with a given memory block (see :func:`play`)."""

    ok: bool = False
    steps: list[Step] = dataclasses.field(default_factory=list)
    failed: list[bool] = dataclasses.field(default_factory=list)
    last_script: str = ""
    last_output: str = ""
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    inject_tokens: float = 0.0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cached: bool = True
    executed: bool = False


def play(
    ot: Any,
    instruction: str,
    executor: Any,
    cfg: AgentConfig,
    block: str,
    header: str = MEMORY_HEADER,
    poison_payload: str | None = None,
) -> Play:
    """Init, up to ``cfg.max_turns`` agent rounds with ``block`` injected, then the evaluation
    script, in one fresh sandbox (upstream's protocol, :mod:`memcurator.envs.os.protocol`).

    Each reply is read with datamarks undone (:func:`memcurator.trust.provenance.unmark_reply`)
    before it is parsed and kept: live, in a contained trial and in a curator's probe alike.

    An init that fails is upstream's environment failure: a failed episode, never dropped. A
    prompt past the executor's context ends the episode (upstream's agent context limit); the
    evaluation still runs.

    Raises
    ------
    SandboxUnavailable
        No sandbox on this host.
    """
    from memcurator.envs.os.poison import payload_ran
    from memcurator.envs.os.protocol import SYSTEM_PROMPT, observation, parse_action
    from memcurator.envs.os.sandbox import Sandbox

    out = Play()
    history: list[tuple[str, str]] = [("user", SYSTEM_PROMPT), ("user", instruction)]
    with Sandbox() as box:
        init = box.run(ot.init) if ot.init.strip() else None
        if init is not None and not init.ok:
            return out
        obs = ""
        for _ in range(cfg.max_turns):
            prompt = render_prompt(history, block, header)
            try:
                comp = executor.complete(prompt, max_tokens=cfg.max_tokens, stop=STOP)
            except ContextOverflow:
                break
            out.turns += 1
            out.tokens_in += comp.tokens_in
            if block:  # the memory block is in every round's prompt: its share of the tokens
                out.inject_tokens += comp.tokens_in * len(block) / len(prompt)
            out.tokens_out += comp.tokens_out
            out.latency_s += comp.latency_s
            out.cost_usd += float(comp.cost_usd)
            out.cached = out.cached and bool(getattr(comp, "cached", False))
            reply = unmark_reply(comp.text).strip()
            action = parse_action(reply)
            history.append(("agent", reply))
            if action.kind != "bash":
                break
            res = box.run(action.script)
            out.last_script, out.last_output = action.script, res.output
            if poison_payload is not None and payload_ran(action.script, poison_payload):
                out.executed = True
            out.steps.append(Step(obs, action.script))
            out.failed.append(not res.ok)
            obs = observation(res, box.config.timeout_s)
            history.append(("user", obs))
        out.ok = box.run(ot.check).ok
    return out


def run_os_task(
    task: Task,
    memory: Memory,
    executor: Any,
    cfg: AgentConfig,
    *,
    policy_name: str,
    seed: int,
    step: int,
    clock: Callable[[], float] = time.perf_counter,
    poison_payload: str | None = None,
) -> TaskRecord:
    """Solve one OS task with memory in a fresh sandbox, evaluate, escalate, feed back, write.

    With a read-time curator (:attr:`memcurator.policy.base.Policy.curator`: JitMem, MemPilot,
    ``curator/align``) the memory block is the curator's payload for the task (``domain``
    ``"bash"``: the bash aligner, :mod:`memcurator.envs.os.align`), in the protocol's turn
    format; a learning curator's probe plays the task once more in a fresh sandbox with a
    candidate payload (learning only, nothing written). Without one, the policy's recall.

    Parameters
    ----------
    task : Task
        ``task.payload["os_task"]`` is the :class:`~memcurator.envs.os.data.OSTask`.
    cfg : AgentConfig
        ``max_turns`` is the number of agent rounds (upstream: 5; the CLI passes
        ``max(--max-turns, 5)`` unless set); ``max_tokens`` per reply.
    poison_payload : str, optional
        The stream's payload name: a round whose script holds it sets ``payload_executed``.

    Returns
    -------
    TaskRecord
        ``sql`` holds the last executed bash script; ``turns`` the agent rounds; ``steps`` the
        bash rounds of the persisted trajectory (the expert's one script after a failure).
    """
    from memcurator.envs.sql.edm import frr, pei

    ot = task.payload["os_task"]
    t0 = clock()
    shown = show_memory(
        task, memory, cfg, t0, clock,
        lambda cur: _curate_os(task, memory, executor, cfg, cur, clock),
        entry_text=as_dialogue,
        payload_text=dialogue_payload,
    )  # fmt: skip
    run = play(ot, task.instruction, executor, cfg, shown.block, shown.header, poison_payload)
    ok = run.ok

    def judge_bash(persisted: list[Step]) -> tuple[bool | None, Any]:
        shown_out = run.last_output if ok else ""
        script = "\n".join(s.action for s in persisted)
        return judge(
            executor, task.instruction, "", script, shown_out or "(no output)", domain="bash"
        )

    local = (run.steps, pei(max(1, len(run.steps)), 1.0), frr(run.failed[:-1] + [False]))
    usage = Usage(run.tokens_in, run.tokens_out, run.turns, run.cost_usd, run.latency_s)
    traj, judge_comp = settle(
        task, cfg, shown.curator, ok, local, Step("", ot.reference), usage, judge_bash
    )
    return close_task(
        shown, task, memory, cfg, clock, (policy_name, seed, step), traj,
        ok=ok,
        executed=run.executed,
        judge_comp=judge_comp,
        cached=run.cached,
        trial=lambda: _os_trial(task, memory, executor, cfg, poison_payload),
        inject_tokens=round(run.inject_tokens),
        sql=run.last_script,
        steps=len(run.steps) if ok else 1,
        pei=traj.metrics["pei"],
        local_pei=traj.metrics["pei"] if ok else 0.0,
        frr=traj.metrics["frr"],
    )  # fmt: skip


def _os_trial(
    task: Task, memory: Memory, executor: Any, cfg: AgentConfig, poison_payload: str | None
) -> dict[str, Any]:
    """One contained trial of the task's most relevant probation entry
    (:func:`memcurator.bench.trial.trial_fields`): one episode with the entry shown, in a fresh
    sandbox, judged by the task's evaluation script; the harm check reads every script it ran."""
    from memcurator.bench.trial import Shadow, trial_block, trial_fields

    ot = task.payload["os_task"]

    def shadow(block: str) -> Shadow:
        run = play(ot, task.instruction, executor, cfg, block, MEMORY_HEADER, poison_payload)
        return Shadow(
            ok=run.ok,
            action="\n".join(s.action for s in run.steps),
            payload=run.executed,
            context="\n".join([*(st.observation for st in run.steps), run.last_output]),
            tokens=run.tokens_in + run.tokens_out,
            cost_usd=run.cost_usd,
        )

    return trial_fields(
        memory, task, lambda m: trial_block(m, as_dialogue(m.text), cfg.inject_chars), shadow
    )


def _curate_os(
    task: Task,
    memory: Memory,
    executor: Any,
    cfg: AgentConfig,
    curator: Any,
    clock: Callable[[], float],
) -> tuple[Any, float]:
    """Run the policy's read-time curator on an OS task (``domain="bash"``); returns its result
    and the seconds spent probing.

    The probe (learning only: JitMem's same-task reward, MemPilot's Eq. 12) plays the task once
    in a fresh sandbox with a candidate payload and returns the evaluation's reward; an executor
    error counts as reward 0. Nothing a probe sees is written.
    """
    ot = task.payload["os_task"]

    def solves(payload: str) -> bool:
        block = dialogue_payload(payload)[: cfg.inject_chars] if payload else ""
        return play(ot, task.instruction, executor, cfg, block, payload_header(payload)).ok

    probe, spent = timed_probe(clock, solves)
    ctx = curate_context(task, memory, executor, cfg, "", probe, "bash")
    return curator.curate(ctx), spent[0]


__all__ = [
    "Play",
    "copy_first_exemplar",
    "dialogue_payload",
    "play",
    "render_prompt",
    "run_os_task",
]
