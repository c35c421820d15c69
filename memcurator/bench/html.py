"""One self-contained HTML page of a bench summary: tables, plots, settings, sample sizes, glossary.

The page has no external references (styles inline, plots as base64 PNG), so it can be mailed
or archived as one file. Text comes from the same sources as the terminal: the measure list
(:mod:`memcurator.bench.measures`) and the glossary (:mod:`memcurator.glossary`).
"""

from __future__ import annotations

import base64
import html
import tempfile
from pathlib import Path
from typing import Any

from memcurator.bench import measures
from memcurator.bench.measures import MIN_TASKS, Measure
from memcurator.bench.render import headers_and_cells, n_of, seeds_title, small_n_notes
from memcurator.files import atomic_write
from memcurator.glossary import GLOSSARY

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left;font-weight:600;
white-space:nowrap}.config th{text-align:left}
.wide{overflow-x:auto}.note{background:#fff6d6;border-left:4px solid #e0b000;padding:.4em .8em;
margin:.4em 0}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
dt{font-weight:600;margin-top:.6em}dd{margin-left:1.2em}
.config td{text-align:left;font-family:ui-monospace,monospace;font-weight:normal}
"""

#: plots the page regenerates from the merged data; other PNGs of the folders are embedded as is
_OWN_PLOTS = ("accuracy_vs_bytes.png", "accuracy_over_time.png")


def _e(x: Any) -> str:
    return html.escape(str(x))


def _table(heads: list[str], rows: list[list[str]], cls: str = "") -> str:
    th = "".join(f"<th>{_e(h).replace(chr(10), '<br>')}</th>" for h in heads)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class="wide"><table class="{cls}"><tr>{th}</tr>{body}</table></div>'


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{data}"></figure>'


def report_page(
    summary: list[dict[str, Any]],
    *,
    config: dict[str, Any] | None = None,
    plots: list[tuple[str, bytes]] = (),  # type: ignore[assignment]
    partial: list[str] = (),  # type: ignore[assignment]
    title: str = "memcurator bench report",
) -> str:
    """The HTML text of the report page.

    Parameters
    ----------
    summary : list of dict
        Per-policy rows of :func:`memcurator.bench.report.summarize`.
    config : dict, optional
        Bench settings, shown as a table.
    plots : list of (caption, PNG bytes)
        Embedded as base64 images.
    partial : list of str
        Folders of interrupted runs, shown as a warning.
    title : str
        Page title.

    Examples
    --------
    >>> page = report_page([{"policy": "lru", "seeds": 1, "accuracy": 0.5, "tasks": 30}])
    >>> "<td>lru</td>" in page and "one seed (no sd)" in page and "http" not in page
    True
    """
    heads, rows = headers_and_cells(summary)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(seeds_title(summary))}. n = tasks a measure rests on, over all seeds; "
        f"* marks fewer than {MIN_TASKS}. Terms are explained in the glossary below.</p>",
    ]
    for p in partial:
        parts.append(f'<p class="note">Partial folder (interrupted run): {_e(p)}</p>')
    parts.append("<h2>Results</h2>")
    parts.append(_table(heads, rows))
    for note in small_n_notes(summary):
        parts.append(f'<p class="note">{_e(note)}</p>')
    legend = [[m.header, m.description] for m in measures.MEASURES]
    parts.append(_table(["column", "what it is"], legend, "config"))
    parts.append("<h2>Sample sizes</h2>")
    uniq: list[Measure] = []  # one column per distinct count (tasks, victim tasks, attacker tasks)
    for m in measures.MEASURES:
        if m.n_key is not None and all(u.n_key != m.n_key for u in uniq):
            uniq.append(m)
    n_heads = ["policy", "seeds"] + [f"n for {m.header}" for m in uniq]
    n_rows = [
        [str(r["policy"]), str(r.get("seeds", 1))]
        + [("—" if (n := n_of(r, m)) is None else str(n)) for m in uniq]
        for r in summary
    ]
    parts.append(_table(n_heads, n_rows))
    if plots:
        parts.append("<h2>Plots</h2>")
        for caption, png in plots:
            parts.append(f"<p>{_e(caption)}</p>" + _img(png, caption))
    if config:
        parts.append("<h2>Configuration</h2>")
        rows_cfg = [[k, str(v)] for k, v in config.items()]
        parts.append(_table(["setting", "value"], rows_cfg, "config"))
    parts.append("<h2>Glossary</h2><dl>")
    for t in GLOSSARY:
        also = f" <small>(also: {_e(', '.join(t.aliases))})</small>" if t.aliases else ""
        parts.append(f"<dt>{_e(t.name)}{also}</dt><dd>{_e(t.text)}</dd>")
    parts.append("</dl></body></html>")
    return "\n".join(parts)


def write_report_page(
    path: Path,
    summary: list[dict[str, Any]],
    *,
    config: dict[str, Any] | None = None,
    records: list[dict[str, Any]] = (),  # type: ignore[assignment]
    extra_plots: list[Path] = (),  # type: ignore[assignment]
    partial: list[str] = (),  # type: ignore[assignment]
) -> Path:
    """Draw the plots, build :func:`report_page` and write it atomically to ``path``.

    Parameters
    ----------
    records : list of dict
        Per-task records (``records.csv`` rows); the over-time plot needs them.
    extra_plots : list of Path
        Other PNG files to embed (e.g. fronts); the two standard plots are redrawn instead.

    Raises
    ------
    OSError
        ``path``'s folder does not exist or cannot be written.
    """
    from memcurator.bench.report import plot, plot_over_time

    plots: list[tuple[str, bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            a = plot(Path(tmp) / "a.png", summary)
            plots.append(("Task accuracy against peak resident memory, per policy", a.read_bytes()))
            if records:
                b = plot_over_time(Path(tmp) / "b.png", list(records))
                plots.append(
                    (
                        "Accuracy over the stream (trailing window), drift and attack marked",
                        b.read_bytes(),
                    )
                )
        except ImportError:
            pass
    for p in extra_plots:
        if p.name not in _OWN_PLOTS:
            plots.append((p.stem.replace("_", " "), p.read_bytes()))
    page = report_page(summary, config=config, plots=plots, partial=list(partial))
    return atomic_write(path, page)
