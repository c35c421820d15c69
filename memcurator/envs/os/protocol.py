"""The upstream OS-interaction episode: init → up to 5 agent rounds → evaluation script.

LifelongAgentBench ``src/tasks/instance/os_interaction/task.py`` (commit ``d6f19b4``):

* the initialisation script runs; a non-zero exit or a timeout is an environment failure;
* the agent replies each round; ``Act:\\s*(.+)`` picks the action. ``bash``: every
  ```` ```bash\\n…\\n``` ```` block, joined by a blank line, runs as one command and the agent
  sees ``"The output of the OS:\\n\\n" + output`` (or ``"The output of the OS is empty."``, or
  the timeout message); ``finish`` ends the episode; anything else is an invalid action and
  ends it too;
* the evaluation script runs in the same machine; the task is correct iff it exits 0.

:data:`SYSTEM_PROMPT` is a paraphrase of the upstream instruction (PoA's
``chat_history_items/standard/os_interaction.json`` is not in the project's data): the same
two actions and the same reply format, as AgentBench's OS prompt has them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memcurator.envs.os.data import OSTask
from memcurator.envs.os.sandbox import CommandResult, Sandbox, SandboxConfig

MAX_ROUNDS = 5

SYSTEM_PROMPT = (
    "You are an assistant that acts like a person working on a Linux (Ubuntu) machine; I play "
    "the role of the operating system. Do the operations I ask for. Each turn, first think "
    "about what to do, then take exactly one of two actions.\n"
    "1. To run bash code, answer:\n"
    "Think: your thought.\n"
    "Act: bash\n"
    "```bash\n# your bash code\n```\n"
    "2. When you have finished the task, answer:\n"
    "Think: your thought.\n"
    "Act: finish\n"
    "You run as root, starting in /. Each bash block runs on its own; files persist."
)

_ACT = re.compile(r"Act:\s*(.+)")
_BASH = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)


@dataclass(frozen=True)
class Action:
    """A parsed agent reply: ``kind`` is ``"bash"``, ``"finish"`` or ``"invalid"``."""

    kind: str
    script: str = ""
    reason: str = ""


def parse_action(reply: str) -> Action:
    """The action of one agent reply, as upstream parses it.

    Examples
    --------
    >>> parse_action("Think: x\\nAct: bash\\n```bash\\nls /\\n```")
    Action(kind='bash', script='ls /', reason='')
    >>> parse_action("Act: finish").kind
    'finish'
    >>> parse_action("I am done").kind
    'invalid'
    """
    m = _ACT.search(reply)
    if m is None:
        return Action("invalid", reason='no "Act:" line')
    act = m.group(1).lower()
    if act.startswith("bash"):
        return Action("bash", "\n\n".join(_BASH.findall(reply)))
    if act.startswith("finish"):
        return Action("finish")
    return Action("invalid", reason=f"unknown action {m.group(1)[:40]!r}")


def observation(result: CommandResult, timeout_s: float) -> str:
    """What the agent sees after a bash action (upstream wording).

    Examples
    --------
    >>> observation(CommandResult(0, "hi\\n"), 20)
    'The output of the OS:\\n\\nhi\\n'
    >>> observation(CommandResult(0, ""), 20)
    'The output of the OS is empty.'
    """
    if result.timed_out:
        return (
            "The command is marked as timeout since it did not finish within "
            f"{timeout_s:g} seconds."
        )
    if result.output:
        return "The output of the OS:\n\n" + result.output
    return "The output of the OS is empty."


@dataclass
class Round:
    """One agent round: its reply, the parsed action and, for bash, what the command did."""

    reply: str
    action: Action
    result: CommandResult | None = None
    observation: str = ""


@dataclass
class Episode:
    """One task run end to end.

    :func:`run_episode` makes one (:func:`replay`: for one given script).

    Attributes
    ----------
    task : OSTask
    init : CommandResult
    rounds : list of Round
    evaluation : CommandResult or None
        None when the initialisation failed (the episode is then an environment failure).
    seconds : float
        Wall-clock seconds, sandbox start to teardown.
    """

    task: OSTask
    init: CommandResult
    rounds: list[Round] = field(default_factory=list)
    evaluation: CommandResult | None = None
    seconds: float = 0.0

    @property
    def env_failed(self) -> bool:
        """The initialisation script failed or timed out (upstream: environment exception)."""
        return self.evaluation is None

    @property
    def correct(self) -> bool:
        """The evaluation script exited 0."""
        return self.evaluation is not None and self.evaluation.ok


#: A responder sees the conversation so far as (role, text) pairs and returns its next reply.
Responder = Callable[[list[tuple[str, str]]], str]


def run_episode(
    task: OSTask,
    respond: Responder,
    *,
    max_rounds: int = MAX_ROUNDS,
    config: SandboxConfig | None = None,
    system: str = SYSTEM_PROMPT,
) -> Episode:
    """Run ``task`` in a fresh sandbox with ``respond`` as the agent (upstream protocol).

    Parameters
    ----------
    task : OSTask
    respond : callable
        ``respond(history) -> reply``; ``history`` starts with ``("user", system)`` and
        ``("user", task.instruction)`` and grows with ``("agent", reply)`` and
        ``("user", observation)`` pairs.
    max_rounds : int, default 5
    config : SandboxConfig, optional
    system : str
        The instruction shown first.

    Returns
    -------
    Episode

    Raises
    ------
    SandboxUnavailable
        No sandbox on this host.
    """
    cfg = config or SandboxConfig()
    t0 = time.monotonic()
    with Sandbox(cfg) as box:
        init = box.run(task.init) if task.init.strip() else CommandResult(0, "")
        ep = Episode(task, init)
        if not init.ok:
            ep.seconds = time.monotonic() - t0
            return ep
        history: list[tuple[str, str]] = [("user", system), ("user", task.instruction)]
        for _ in range(max_rounds):
            reply = respond(list(history))
            action = parse_action(reply)
            history.append(("agent", reply))
            rnd = Round(reply, action)
            ep.rounds.append(rnd)
            if action.kind != "bash":
                break
            rnd.result = box.run(action.script)
            rnd.observation = observation(rnd.result, cfg.timeout_s)
            history.append(("user", rnd.observation))
        ep.evaluation = box.run(task.check)
    ep.seconds = time.monotonic() - t0
    return ep


@dataclass(frozen=True)
class Validity:
    """The generator's validity test of one task (two fresh sandboxes).

    Made by :func:`check_validity`; the task is valid (:attr:`valid`) when the initialisation
    succeeded, the check failed before the reference ran and passed after it.

    Attributes
    ----------
    init_ok : bool
        The initialisation exited 0 in both sandboxes.
    fails_before : bool
        Sandbox A: init, then the check: it must fail.
    passes_after : bool
        Sandbox B: init, the reference, then the check: it must pass.
    reference : CommandResult or None
        What the reference did in sandbox B (its own exit code is not part of the test).
    seconds : float
        Sandbox B's wall-clock seconds.
    """

    init_ok: bool
    fails_before: bool
    passes_after: bool
    reference: CommandResult | None
    seconds: float

    @property
    def valid(self) -> bool:
        return self.init_ok and self.fails_before and self.passes_after


def replay(task: OSTask, script: str, config: SandboxConfig | None = None) -> Episode:
    """Init, ``script`` as the agent's one bash action, then the evaluation (one sandbox)."""
    sent = [False]

    def respond(history: list[tuple[str, str]]) -> str:
        if sent[0]:
            return "Act: finish"
        sent[0] = True
        return f"Act: bash\n```bash\n{script}\n```"

    return run_episode(task, respond, config=config)


def check_validity(task: OSTask, config: SandboxConfig | None = None) -> Validity:
    """Run the generator's validity rule on ``task`` (see :class:`Validity`)."""
    cfg = config or SandboxConfig()
    with Sandbox(cfg) as box:
        init_a = box.run(task.init) if task.init.strip() else CommandResult(0, "")
        fails_before = init_a.ok and not box.run(task.check).ok
    ep = replay(task, task.reference, cfg)
    ref = ep.rounds[0].result if ep.rounds else None
    return Validity(
        init_a.ok and ep.init.ok,
        fails_before,
        ep.correct,
        ref,
        ep.seconds,
    )


__all__ = [
    "MAX_ROUNDS",
    "SYSTEM_PROMPT",
    "Action",
    "Episode",
    "Responder",
    "Round",
    "Validity",
    "check_validity",
    "observation",
    "parse_action",
    "replay",
    "run_episode",
]
