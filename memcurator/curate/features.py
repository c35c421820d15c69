"""Task features a CPU curation policy conditions on (JitMem's learned operator choice, MemPilot's
orchestrator): cheap, computed from the task text, its schema and what was retrieved."""

from __future__ import annotations

from memcurator.curate.extractive import ParsedTrajectory, literals, parse_schema
from memcurator.retrieve.bm25 import tokenize

FEATURES: tuple[str, ...] = (
    "bank_empty",
    "n_retrieved",
    "top_overlap",
    "same_table",
    "n_literals",
    "is_write",
    "step_frac",
    "evidence",
)

_WRITE = {"insert", "add", "update", "change", "set", "delete", "remove", "record"}


def task_features(
    task: str,
    observation: str,
    parsed: list[ParsedTrajectory],
    *,
    k: int = 1,
    step: int = 0,
    t_max: int = 1,
    evidence: int = 0,
) -> dict[str, float]:
    """Features in [0, 1] (roughly) for one task and its retrieved trajectories.

    Examples
    --------
    >>> f = task_features("Delete member 5", "Table m(id INT)", [], k=3)
    >>> f["bank_empty"], f["is_write"]
    (1.0, 1.0)
    """
    words = set(tokenize(task))
    table, _ = parse_schema(observation)
    overlap = 0.0
    same = 0.0
    for p in parsed:
        w = set(tokenize(p.task))
        overlap = max(overlap, len(words & w) / max(1, len(words | w)))
        if table and p.table.lower() == table.lower():
            same = 1.0
    first = task.strip().split(" ", 1)[0].lower() if task.strip() else ""
    return {
        "bank_empty": 0.0 if parsed else 1.0,
        "n_retrieved": len(parsed) / max(1, k),
        "top_overlap": overlap,
        "same_table": same,
        "n_literals": min(1.0, len(literals(task)) / 5.0),
        "is_write": 1.0 if first in _WRITE else 0.0,
        "step_frac": step / max(1, t_max),
        "evidence": min(1.0, evidence / 3.0),
    }


__all__ = ["FEATURES", "task_features"]
