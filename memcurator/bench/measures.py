"""The measures of a bench summary: one list drives every table, file and page.

Adding a measure column is one line in :data:`MEASURES` (the per-run value must be computed by
:func:`memcurator.bench.report.run_metrics` under the same key, or already be in
``summary.json``'s runs). Rows without the key show "—".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: A measure resting on fewer tasks than this is flagged in tables and pages.
MIN_TASKS = 20


@dataclass(frozen=True)
class Measure:
    """One column of the summary table.

    The table's columns are :data:`MEASURES`, in order.

    Parameters
    ----------
    key : str
        Key of the per-run value in ``summary.json`` (``runs``) and of its mean in ``summary``;
        the sd is under ``key + "_sd"``.
    header : str
        Column title.
    fmt : str
        ``str.format`` spec of one value, e.g. ``"{:.3f}"``.
    description : str
        One line for legends; the full text is the glossary entry ``term``.
    n_key : str or None
        Per-run key counting the tasks the measure rests on (``"tasks"``, ``"n_victim"``,
        ``"n_attacker"``); None for measures that do not average over tasks (bytes, cost).
    term : str or None
        Name of its :mod:`memcurator.glossary` entry.
    """

    key: str
    header: str
    fmt: str
    description: str
    n_key: str | None = None
    term: str | None = None


MEASURES: list[Measure] = [
    Measure("accuracy", "task acc", "{:.3f}", "tasks solved by the local model", "tasks",
            "task accuracy"),
    Measure("victim_accuracy", "victim acc", "{:.3f}", "accuracy on post-drift tasks of "
            "migrated families", "n_victim", "victim accuracy"),
    Measure("same_family_rate", "same-fam inj", "{:.3f}", "tasks given an exemplar of their "
            "own family", "tasks", "same-family injection"),
    Measure("peak_kb", "peak KB", "{:.1f}", "largest resident memory", None, "peak KB"),
    Measure("entry_total_b", "B/entry", "{:.0f}", "bytes per resident entry at the end",
            None, "bytes per entry"),
    Measure("family_coverage", "fam cover", "{:.3f}", "share of the stream's recurring families "
            "with >= 1 resident exemplar at the end", None, "family coverage"),
    Measure("family_coverage_mean", "fam cover avg", "{:.3f}", "family coverage of the "
            "resident set after each task, averaged over the stream", "tasks", "family coverage"),
    Measure("vec_share", "vec share", "{:.2f}", "share of resident bytes that are embedding "
            "vectors", None, "bytes per entry"),
    Measure("energy_mb", "energy MB", "{:.1f}", "bytes embedded + scanned", None,
            "energy proxy"),
    Measure("asr", "inj. ASR", "{:.3f}", "attacker tasks that executed the payload "
            "(lower is better)", "n_attacker", "injection ASR"),
    Measure("escalations", "escal.", "{:.1f}", "tasks sent to the expert", None, "escalation"),
    Measure("cost_usd", "cost $", "{:.3f}", "price of the escalations and curation calls", None,
            "escalation"),
    Measure("tokens_in", "tok in/task", "{:.0f}", "prompt tokens per task", "tasks", "tokens"),
    Measure("tokens_out", "tok out/task", "{:.1f}", "completion tokens per task", "tasks",
            "tokens"),
    Measure("inject_tokens", "inj tok/task", "{:.0f}", "prompt tokens of the injected memory "
            "(block's share of the first prompt)", "tasks", "injected tokens"),
    Measure("curator_calls", "cur calls/task", "{:.2f}", "read-time curation model calls per task",
            "tasks", "curation calls"),
    Measure("curator_tokens", "cur tok/task", "{:.0f}", "tokens in + out of curation calls per "
            "task", "tasks", "curation calls"),
    Measure("cost_per_task", "$/task", "{:.5f}", "USD per task: escalation + curation (MemPilot "
            "Eq. 14)", "tasks", "cost per task"),
    Measure("latency_task_s", "lat s/task", "{:.2f}", "measured seconds per task in the executor "
            "and curation calls", "tasks", "latency proxy"),
    Measure("latency_proxy_s", "proxy s/task", "{:.2f}", "MemPilot's affine latency proxy per task "
            "(Eq. 15-19)", "tasks", "latency proxy"),
    Measure("probe_calls", "probes/task", "{:.2f}", "executions spent training a curator "
            "(excluded from cost and latency)", "tasks", "curation calls"),
    Measure("edm_mp", "MP", "{:.3f}", "EDM memory precision: injected entries with PEI >= 0.8",
            "n_injected", "MP"),
    Measure("mrs", "MRS", "{:.3f}", "EDM retention stability: sd of episode PEI over 5 cycles",
            None, "MRS"),
    Measure("cer", "CER", "{:.2f}", "EDM cognitive efficiency: steps/task over no-memory's "
            "(else keep-all's)", None, "CER"),
    Measure("mem_s", "mem s", "{:.2f}", "seconds in memcurator", None, "mem s / LLM s"),
    Measure("llm_s", "LLM s", "{:.1f}", "seconds in the LLM", None, "mem s / LLM s"),
]  # fmt: skip


def measure(key: str) -> Measure:
    """The measure with ``key``.

    Raises
    ------
    KeyError
        No measure has that key.

    Examples
    --------
    >>> measure("asr").n_key
    'n_attacker'
    """
    for m in MEASURES:
        if m.key == key:
            return m
    raise KeyError(f"no measure {key!r}; known: {[m.key for m in MEASURES]}")


def recurring_families(families: Sequence[str], min_draws: int = 2) -> set[str]:
    """The families drawn at least ``min_draws`` times in a stream (the ones worth covering).

    Examples
    --------
    >>> sorted(recurring_families(["a", "b", "a", "c", "c"]))
    ['a', 'c']
    """
    counts = Counter(families)
    return {f for f, c in counts.items() if c >= min_draws}


def resident_coverage(resident_families: Iterable[str | None], recurring: set[str]) -> float:
    """Family coverage of a resident set: the share of ``recurring`` families with at least one
    resident exemplar (NaN when there is no recurring family).

    TokenWorth's coverage-quality principle (Sec. 4.4) read as a measure: with fewer slots than
    recurring families, a memory that holds one exemplar of more families serves more tasks.

    Parameters
    ----------
    resident_families : iterable of str or None
        The family of each resident exemplar (the bench's ``meta["family"]``; poison excluded by
        the caller).
    recurring : set of str
        The families to cover (:func:`recurring_families` of the stream).

    Returns
    -------
    float
        In [0, 1].

    Examples
    --------
    >>> resident_coverage(["a", "a", "x"], {"a", "b"})
    0.5
    """
    if not recurring:
        return float("nan")
    return len(recurring & {f for f in resident_families if f is not None}) / len(recurring)


class FamilyCoverage:
    """Family coverage of a run's resident set, at the end and averaged over the stream.

    At step t the families to cover are the recurring families of the whole stream that were
    drawn at or before t (a family not drawn yet cannot have an exemplar); the end value is over
    all recurring families.

    Parameters
    ----------
    families : sequence of str
        The family of each task of the stream, in order.

    Examples
    --------
    >>> fc = FamilyCoverage(["a", "b", "a", "b"])
    >>> fc.observe(0, ["a"]); fc.observe(1, ["a"]); fc.observe(2, ["a"]); fc.observe(3, ["a", "b"])
    >>> fc.result()
    {'family_coverage': 1.0, 'family_coverage_mean': 0.75}
    """

    def __init__(self, families: Sequence[str]):
        self.families = list(families)
        self.recurring = recurring_families(self.families)
        self._seen: set[str] = set()
        self._sum = 0.0
        self._n = 0
        self._last = float("nan")

    def observe(self, step: int, resident_families: Iterable[str | None]) -> None:
        """Fold the resident set after task ``step`` (its exemplars' families) in."""
        if 0 <= step < len(self.families) and self.families[step] in self.recurring:
            self._seen.add(self.families[step])
        have = {f for f in resident_families if f is not None}
        if self._seen:
            self._sum += len(self._seen & have) / len(self._seen)
            self._n += 1
        self._last = resident_coverage(have, self.recurring)

    def result(self) -> dict[str, float]:
        """``family_coverage`` (end of the stream) and ``family_coverage_mean`` (over steps)."""
        return {
            "family_coverage": self._last,
            "family_coverage_mean": self._sum / self._n if self._n else float("nan"),
        }
