"""Raw trajectory text, its distilled insight, and the default extractive distiller.

References
----------
CURATOR, Sec. III-B and Alg. 1 line 9: an entry about to fall out of the budget is first
distilled; abstraction gain a = b⁰/b rewards the compaction.
"""

from __future__ import annotations

from memcurator.types import Task, Trajectory


def render_raw(task: Task, traj: Trajectory) -> str:
    """The raw trajectory as stored text: task, every (observation, action) step, the outcome.

    Examples
    --------
    >>> from memcurator.types import Step
    >>> t = Task("t1", "Count the rows", "f1")
    >>> tr = Trajectory("t1", [Step("Table t(a INT)", "SELECT COUNT(*) FROM t;")], reward=1.0)
    >>> print(render_raw(t, tr))
    Task: Count the rows
    Observation: Table t(a INT)
    Action: SELECT COUNT(*) FROM t;
    Outcome: success (reward 1, solver local)
    """
    lines = [f"Task: {task.instruction}"]
    for s in traj.steps:
        lines.append(f"Observation: {s.observation}")
        lines.append(f"Action: {s.action}")
    verdict = "success" if traj.reward >= 0.5 else "failure"
    lines.append(f"Outcome: {verdict} (reward {traj.reward:g}, solver {traj.solver})")
    return "\n".join(lines)


def render_insight(instruction: str, action: str) -> str:
    """A distilled insight: the task and the action that solved it, nothing else."""
    return f"Task: {instruction}\nAction: {action}"


class ExtractiveDistiller:
    """Compacts a raw trajectory to its task line and its final action (no model needed).

    Parameters
    ----------
    max_chars : int, default 600
        Longer actions are cut at this many characters.

    Examples
    --------
    >>> d = ExtractiveDistiller()
    >>> raw = "Task: Count rows\\nObservation: dump\\nAction: SELECT 1;\\nOutcome: success"
    >>> print(d.distill(raw))
    Task: Count rows
    Action: SELECT 1;
    >>> d.distill("no structure here") is None
    True
    """

    def __init__(self, max_chars: int = 600):
        self.max_chars = max_chars

    def distill(self, text: str) -> str | None:
        """The insight text, or None when ``text`` has no ``Task:``/``Action:`` structure."""
        task = None
        action = None
        for line in text.splitlines():
            if line.startswith("Task: ") and task is None:
                task = line[6:].strip()
            elif line.startswith("Action: "):
                action = line[8:].strip()
        if not task or not action:
            return None
        out = render_insight(task, action[: self.max_chars])
        return out if len(out) < len(text) else None
