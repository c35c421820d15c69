"""How the options of a benchmark run combine: defaults that depend on the environment, and the
combinations that make no sense (``--resume`` with ``--overwrite``, a transport without a peer
group, ...), checked in one place so that ``memcurator bench`` stays a thin shell.

Examples
--------
>>> o = BenchOptions(env="sql", out=Path("results/x")).resolve()
>>> o.policies, o.payload, o.drift
('curator/align,lru,keep-all,no-memory', 'drop', 0.3)
>>> BenchOptions(transport="http").resolve()
Traceback (most recent call last):
...
memcurator.errors.InvalidInput: --transport is for a peer group (--peers M)
>>> paired_baseline(None, ["curator", "lru"]), paired_baseline(None, ["keep-all", "lru"])
('', 'keep-all')
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from memcurator.errors import InvalidInput

#: The main job: a budgeted, curated memory (CURATOR read through JitMem's extractive curator)
#: against the naive bounded baseline at the same budget, the unbounded one, and no memory.
DEFAULT_POLICIES = "curator/align,lru,keep-all,no-memory"
#: --env os: the same comparison (read-time curators read bash through the bash aligner).
OS_DEFAULT_POLICIES = DEFAULT_POLICIES
#: --env os: tokens per agent reply (a Think line and a bash block; SQL needs 96)
OS_MAX_TOKENS = 384
ENVS = ("sql", "os")
TRANSPORTS = ("inproc", "http")
T = TypeVar("T")


@dataclass(frozen=True)
class BenchOptions:
    """The options of a benchmark run whose defaults or validity depend on each other.

    Parameters
    ----------
    env : {"sql", "os"}
        Task environment.
    policies : str or None
        Comma-separated presets; None: :data:`DEFAULT_POLICIES` (``os``:
        :data:`OS_DEFAULT_POLICIES`).
    payload : str or None
        Single-agent poison payload; None: ``drop`` (``os``: ``destroy``).
    drift : float or None
        Share of families that drift; None: 0.3 (``os``: 0).
    peers : int
        Agents in a peer group; 0 for single agents.
    out : Path or None
        Results folder; None: ``results/<time>``.
    overwrite, resume : bool
        Replace, or continue, the results already in ``out`` (not both).
    transport : {"inproc", "http"}
        How a peer group exchanges.
    payloads : str
        A peer group's attack payloads.
    ray : str or None
        Ray address for single-agent runs.
    """

    env: str = "sql"
    policies: str | None = None
    payload: str | None = None
    drift: float | None = None
    peers: int = 0
    out: Path | None = None
    overwrite: bool = False
    resume: bool = False
    transport: str = "inproc"
    payloads: str = "classic"
    ray: str | None = None

    def resolve(self) -> BenchOptions:
        """These options with the environment's defaults filled in, once they are checked.

        The OS environment's sandbox tools are checked first, so a run fails before any work
        (never a silent skip).

        Returns
        -------
        BenchOptions
            ``policies``, ``payload``, ``drift`` and ``out`` never None.

        Raises
        ------
        InvalidInput
            An unknown environment or transport, or options that do not go together (the
            message names them).
        SandboxUnavailable
            ``env="os"`` on a host without the sandbox's tools.
        """
        if self.env not in ENVS:
            raise InvalidInput(f"unknown env {self.env!r}; known: {sorted(ENVS)}")
        os_env = self.env == "os"
        if os_env:
            from memcurator.envs.os.sandbox import require_tools

            require_tools()
        done = dataclasses.replace(
            self,
            policies=_or(self.policies, OS_DEFAULT_POLICIES if os_env else DEFAULT_POLICIES),
            payload=_or(self.payload, "destroy" if os_env else "drop"),
            drift=_or(self.drift, 0.0 if os_env else 0.3),
            out=_or(self.out, Path("results") / time.strftime("%Y%m%d-%H%M%S")),
        )
        for problem in done.conflicts():
            raise InvalidInput(problem)
        return done

    def conflicts(self) -> list[str]:
        """What is wrong with these options, one message each, in the order they are checked;
        empty when they go together."""
        out = self.out
        rules = [
            (self.env == "os" and self.peers, "--peers is not wired for --env os yet"),
            (
                out is not None and out.exists() and not out.is_dir(),
                f"--out {str(out)!r} is a file, not a folder",
            ),
            (
                self.resume and self.overwrite,
                "choose one of --resume (keep the finished runs) and --overwrite (replace them)",
            ),
            (
                self.resume and self.peers,
                "--resume is for single-agent benches; rerun a peer group with --overwrite",
            ),
            (
                self.transport not in TRANSPORTS,
                f"unknown --transport {self.transport!r}; known: {sorted(TRANSPORTS)}",
            ),
            (
                self.transport != "inproc" and not self.peers,
                "--transport is for a peer group (--peers M)",
            ),
            (
                self.payloads != "classic" and not self.peers,
                "--payloads is for a peer group (--peers M); single agents take --payload",
            ),
            (
                self.ray is not None and self.peers,
                "--ray is for single-agent benches (a peer group is one coupled run)",
            ),
        ]
        return [msg for broken, msg in rules if broken]


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def paired_baseline(baseline: str | None, policies: Sequence[str]) -> str:
    """The policy the others are paired with after a single-agent run; ``""`` for none.

    ``baseline`` None means keep-all when it ran; ``""`` asks for no pairing.

    Raises
    ------
    InvalidInput
        ``baseline`` names a policy that is not among ``policies``.
    """
    pair_with = "keep-all" if baseline is None else baseline
    if pair_with and pair_with not in policies:
        if baseline is not None:
            raise InvalidInput(
                f"--baseline {baseline!r} is not among --policies {','.join(policies)}"
            )
        return ""
    return pair_with


__all__ = [
    "DEFAULT_POLICIES",
    "OS_DEFAULT_POLICIES",
    "OS_MAX_TOKENS",
    "BenchOptions",
    "paired_baseline",
]
