"""Render a bench summary for people (terminal tables that fit) and machines (md, csv, json).

Everything is driven by :data:`memcurator.bench.measures.MEASURES`; a summary is the list of
per-policy rows of :func:`memcurator.bench.report.summarize`.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from memcurator.bench import measures
from memcurator.bench.measures import MIN_TASKS, Measure
from memcurator.files import dumps_strict


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return None if math.isnan(v) else float(v)


def n_of(row: dict[str, Any], m: Measure) -> int | None:
    """Tasks the measure ``m`` rests on for one policy, summed over its seeds (None: n/a).

    Examples
    --------
    >>> from memcurator.bench.measures import measure
    >>> n_of({"seeds": 3, "n_victim": 7.0}, measure("victim_accuracy"))
    21
    """
    if m.n_key is None:
        return None
    v = _num(row.get(m.n_key))
    if v is None:
        return None
    return int(round(v * int(row.get("seeds", 1) or 1)))


def fmt_value(row: dict[str, Any], m: Measure) -> str:
    """``mean ± sd`` (sd only with two or more seeds and sd > 0); "—" when missing."""
    v = _num(row.get(m.key))
    if v is None:
        return "—"
    s = m.fmt.format(v)
    sd = _num(row.get(m.key + "_sd"))
    if int(row.get("seeds", 1) or 1) > 1 and sd:
        s += " ± " + m.fmt.format(sd)
    return s


def seeds_title(summary: list[dict[str, Any]]) -> str:
    """What the numbers are: "mean ± sd over 3 seeds", or "one seed (no sd)".

    Examples
    --------
    >>> seeds_title([{"seeds": 1}, {"seeds": 1}])
    'one seed (no sd)'
    >>> seeds_title([{"seeds": 3}])
    'mean ± sd over 3 seeds'
    """
    seeds = sorted({int(r.get("seeds", 1) or 1) for r in summary})
    if seeds == [1]:
        return "one seed (no sd)"
    if len(seeds) == 1:
        return f"mean ± sd over {seeds[0]} seeds"
    return "mean ± sd over seeds (see the seeds column)"


def _uniform_n(summary: list[dict[str, Any]], m: Measure) -> int | None:
    ns = {n_of(r, m) for r in summary}
    return ns.pop() if len(ns) == 1 else None


def _small(n: int | None) -> bool:
    return n is not None and n < MIN_TASKS


def headers_and_cells(
    summary: list[dict[str, Any]],
) -> tuple[list[str], list[list[str]]]:
    """Column headers (with ``n=`` where one n holds for every row) and formatted cells.

    A ``*`` after an n marks a measure that rests on fewer than :data:`MIN_TASKS` tasks.
    """
    mixed_seeds = len({r.get("seeds") for r in summary}) > 1
    heads = ["policy"] + (["seeds"] if mixed_seeds else [])
    uni = {m.key: _uniform_n(summary, m) for m in measures.MEASURES}
    for m in measures.MEASURES:
        n = uni[m.key]
        if m.n_key is None:
            heads.append(m.header)
        elif n is not None:
            heads.append(f"{m.header}\nn={n}{'*' if _small(n) else ''}")
        else:
            heads.append(f"{m.header}\n(n)")
    rows = []
    for r in summary:
        cells = [str(r["policy"])] + ([str(r.get("seeds"))] if mixed_seeds else [])
        for m in measures.MEASURES:
            c = fmt_value(r, m)
            if m.n_key is not None and uni[m.key] is None:
                n = n_of(r, m)
                c += f" ({n}{'*' if _small(n) else ''})"
            cells.append(c)
        rows.append(cells)
    return heads, rows


def small_n_notes(summary: list[dict[str, Any]]) -> list[str]:
    """One warning per measure that rests on fewer than :data:`MIN_TASKS` tasks for some policy;
    the policies are named when the others' n is large enough (a newcomer read "MP rests on 0
    tasks" as the whole column's, where only no-memory had none).

    Examples
    --------
    >>> small_n_notes([{"policy": "a", "seeds": 1, "n_victim": 2, "n_attacker": 30,
    ...                 "tasks": 50}])[0]
    'victim acc rests on 2 tasks (fewer than 20): read it as an anecdote, not a measurement'
    >>> small_n_notes([{"policy": "a", "seeds": 1, "n_victim": 2, "n_attacker": 30,
    ...                 "tasks": 50}, {"policy": "b", "seeds": 1, "n_victim": 40,
    ...                 "n_attacker": 30, "tasks": 50}])[0]
    'victim acc rests on 2 tasks for a (fewer than 20): read it as an anecdote, not a measurement'
    """
    notes = []
    for m in measures.MEASURES:
        small = [(str(r["policy"]), n) for r in summary
                 if (n := n_of(r, m)) is not None and n < MIN_TASKS]  # fmt: skip
        if small:
            ns = sorted({n for _, n in small})
            what = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]} to {ns[-1]}"
            if len(small) < len(summary):
                what += " tasks for " + ", ".join(dict.fromkeys(p for p, _ in small))
            else:
                what += " tasks"
            notes.append(
                f"{m.header} rests on {what} (fewer than {MIN_TASKS}): read it as an "
                "anecdote, not a measurement"
            )
    return notes


def tables(summary: list[dict[str, Any]], width: int, title: str = "memcurator bench") -> list[Any]:
    """rich Tables of the summary, each no wider than ``width`` columns.

    Columns are packed left to right; a column that would make a table wider than ``width``
    starts a new table (the policy column repeats in each). Nothing is dropped.

    Raises
    ------
    ValueError
        ``width`` is too narrow for the policy column and one measure (under 30 columns).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    if width < 30:
        raise ValueError(f"a terminal of {width} columns is too narrow for the summary table")
    heads, rows = headers_and_cells(summary)
    fixed = 2 if "seeds" in heads else 1
    measure = Console(width=100_000).measure  # natural widths, not clamped to the terminal

    def build(cols: list[int], part: int) -> Any:
        t = Table(
            title=f"{title} — {seeds_title(summary)}" if part == 1 else f"{title} (continued)",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            title_justify="left",
        )
        for i in range(fixed):
            t.add_column(heads[i], style="bold" if i == 0 else None, no_wrap=True)
        for c in cols:
            t.add_column(heads[c], justify="right", no_wrap=True)
        for r in rows:
            t.add_row(*r[:fixed], *[r[c] for c in cols])
        return t

    groups: list[list[int]] = [[]]
    for c in range(fixed, len(heads)):
        trial = groups[-1] + [c]
        if groups[-1] and measure(build(trial, 1)).maximum > width:
            groups.append([c])
        else:
            groups[-1] = trial
    # even out the parts (no lone last column) when the same number of tables still fits
    cols = [c for g in groups for c in g]
    size = -(-len(cols) // len(groups))
    even = [cols[i : i + size] for i in range(0, len(cols), size)]
    if len(even) == len(groups) and all(measure(build(g, 1)).maximum <= width for g in even):
        groups = even
    return [build(g, i + 1) for i, g in enumerate(groups)]


def print_summary(
    summary: list[dict[str, Any]], console: Any, title: str = "memcurator bench"
) -> None:
    """Print the summary tables fitting ``console.width``, then the small-n warnings."""
    for t in tables(summary, console.width, title):
        console.print(t)
    for note in small_n_notes(summary):
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(
        "[dim]n = tasks a measure rests on (all seeds); * = fewer than "
        f"{MIN_TASKS}. `memcurator explain TERM` says what a column means.[/dim]"
    )


def to_markdown(summary: list[dict[str, Any]]) -> str:
    """The summary as a Markdown table (n in the header, or per cell when it differs).

    Examples
    --------
    >>> print(to_markdown([{"policy": "a", "seeds": 1, "accuracy": 0.5, "tasks": 40}]
    ...                   ).splitlines()[2].split(" | ")[:2])
    ['| a', '0.500']
    """
    heads, rows = headers_and_cells(summary)
    heads = [h.replace("\n", " (") + (")" if "\n" in h else "") for h in heads]
    out = ["| " + " | ".join(heads) + " |", "|---" * len(heads) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def machine_rows(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows: policy, seeds, then ``key``, ``key_sd``, ``key_n`` for every measure."""
    out = []
    for r in summary:
        d: dict[str, Any] = {"policy": r["policy"], "seeds": r.get("seeds", 1)}
        for m in measures.MEASURES:
            d[m.key] = _num(r.get(m.key))
            d[m.key + "_sd"] = _num(r.get(m.key + "_sd"))
            d[m.key + "_n"] = n_of(r, m)
        out.append(d)
    return out


def to_csv(summary: list[dict[str, Any]]) -> str:
    """The summary as CSV (empty cells for missing values)."""
    rows = machine_rows(summary)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["policy"])
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if v is None else v for k, v in r.items()})
    return buf.getvalue()


def to_json(summary: list[dict[str, Any]], config: dict[str, Any] | None = None) -> str:
    """The summary as strict JSON: ``{"title", "measures", "rows", "notes", "config"}``."""
    doc = {
        "title": seeds_title(summary),
        "measures": [
            {"key": m.key, "header": m.header, "description": m.description, "term": m.term}
            for m in measures.MEASURES
        ],
        "rows": machine_rows(summary),
        "notes": small_n_notes(summary),
        "config": config or {},
    }
    return dumps_strict(doc, indent=2)
