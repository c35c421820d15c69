"""First render of the inspector (``/ui``) on a namespace of N entries, in headless chromium.

Fills a SQLite namespace with N entries in bulk through the store (each with an ``admit`` row
in the decision log; one in 50 on trust probation), serves it with ``memcurator serve`` on
127.0.0.1, and opens the page in Debian's chromium (Selenium through chromedriver). The page
marks ``ready:<view>`` (``performance.mark``) once a view is on screen; the benchmark reads:

- **cold overview**: the first load of ``/ui`` after the server started, from navigation start
  to the overview on screen; it includes the server opening the tenant (reading N entries);
- **overview**: a full reload of ``/ui`` (HTML, CSS, JS, ``whoami``, ``overview``), the tenant
  open: the first render a person sees;
- **entries, search, decisions, trust**: from the hash change to the view on screen (one
  server-side page of 50 rows, a text search over all N, the newest 100 log rows, the
  probation queue);
- **bytes plot**: the overview's plot (its own request), the first one replaying the log;
- the server's time for each route alone (httpx, same key), an entry page's two routes too.

Reports the median and max of ``--repeat`` runs in ms. A benchmark, not a test: it asserts
nothing. Target of issue 34: first render of a 10^5-entry namespace <= 1 s.

Usage::

    python benchmarks/inspector_render.py --entries 100000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _inspector_util import browser  # noqa: E402

from memcurator import Memory  # noqa: E402
from memcurator.retrieve.hybrid import recall_text  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.service.launch import ServeProcess  # noqa: E402
from memcurator.store.sizing import default_sizeof  # noqa: E402
from memcurator.store.sqlite import SQLiteStore  # noqa: E402
from memcurator.types import Entry, TrustState  # noqa: E402

NS = "big"


def _text(i: int) -> str:
    col = f"c{i % 31}"
    return f"Task: report {i} on table p{i % 997} column {col}\nAction: SELECT {col} FROM p{i};"


def fill(store: str, n: int) -> float:
    """Create namespace :data:`NS` and insert ``n`` entries and their admit rows; seconds."""
    with Memory(store, namespace=NS, policy="curator", max_bytes=None) as m:
        emb = m.embedder
    s = SQLiteStore(store)
    t0 = time.perf_counter()
    for lo in range(0, n, 5000):
        with s.transaction(namespace=NS):
            for i in range(lo, min(lo + 5000, n)):
                text = _text(i)
                held = i % 50 == 49
                trust = TrustState(probation="origin external" if held else None)
                e = np.asarray(emb.embed(recall_text(text)), dtype=np.float32)
                b = default_sizeof(text, trust.legacy(), e)
                origin = "external" if held else "self"
                s.insert(Entry(f"e{i}", NS, "insight", text, b, b, e, origin, "bench", trust=trust))
                s.log(
                    NS,
                    step=i,
                    action="admit",
                    entry_id=f"e{i}",
                    score=0.0,
                    reason="bulk fill (benchmark)",
                    policy="curator",
                    nbytes=b,
                )
    s.close()
    return time.perf_counter() - t0


def _ready(drv: Any, view: str, timeout_s: float = 120.0) -> None:
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        if drv.execute_script(
            "return performance.getEntriesByName(arguments[0]).length", "ready:" + view
        ):
            return
        time.sleep(0.005)
    raise TimeoutError(view)


def _mark_ms(drv: Any, view: str, since: str | None = None) -> float:
    """ms from ``since`` (a mark; None: navigation start) to the view's ready mark."""
    return float(
        drv.execute_script(
            "const t = (n) => performance.getEntriesByName(n).at(-1).startTime;"
            "return t(arguments[0]) - (arguments[1] ? t(arguments[1]) : 0);",
            "ready:" + view,
            since,
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="insp-bench-"))
    store = str(d / "store.db")
    fill_s = fill(store, a.entries)
    kt = KeyTable(store + ".keys")
    _, tok = kt.create(NS, name="bench", scopes=("read",))
    kt.close()
    print(f"filled {a.entries:,} entries in {fill_s:.1f} s; load average {os.getloadavg()}")
    rows: list[tuple[str, list[float]]] = []
    with ServeProcess(store, keys=store + ".keys", log_path=str(d / "server.log")) as sp:
        drv = browser(d / "profile")
        try:
            drv.get(sp.url + "/ui")
            drv.execute_script("sessionStorage.setItem('memcurator.key', arguments[0])", tok)
            drv.get(sp.url + "/ui#/overview")  # same document: a fragment change, no reload
            drv.refresh()
            _ready(drv, "overview")
            rows.append(("cold overview (opens the tenant)", [_mark_ms(drv, "overview")]))
            _ready(drv, "plot")
            rows.append(("cold bytes plot (first log replay)", [_mark_ms(drv, "plot")]))
            warm, plot = [], []
            for _ in range(a.repeat):
                drv.refresh()
                _ready(drv, "overview")
                _ready(drv, "plot")
                warm.append(_mark_ms(drv, "overview"))
                plot.append(_mark_ms(drv, "plot"))
            rows.append(("overview (full page load)", warm))
            rows.append(("bytes plot drawn (full page load)", plot))
            views = [
                ("entries page 1 of 50", "#/entries", "entries"),
                ("entries search 'p41 column'", "#/entries?q=p41%20column", "entries"),
                ("decisions, newest 100", "#/decisions", "decisions"),
                ("trust: probation queue", "#/trust", "trust"),
            ]
            for label, h, view in views:
                xs = []
                for i in range(a.repeat):
                    drv.execute_script(
                        "performance.clearMarks('ready:' + arguments[1]);"
                        "performance.mark('go'); location.hash = arguments[0];",
                        h + ("&" if "?" in h else "?") + f"r={i}",
                        view,
                    )
                    _ready(drv, view)
                    xs.append(_mark_ms(drv, view, "go"))
                rows.append((label, xs))
        finally:
            drv.quit()
        h = {"Authorization": f"Bearer {tok}"}
        for route in (
            "/ui/api/overview",
            "/ui/api/entries?limit=50",
            "/ui/api/entries?q=p41%20column&limit=50",
            "/ui/api/decisions?limit=100",
            "/ui/api/probation?limit=50",
            "/ui/api/usage",
            "/ui/api/entries/e99990",
            "/ui/api/entries/e99990/value",
        ):
            xs = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                r = httpx.get(sp.url + route, headers=h, timeout=120)
                xs.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text
            rows.append((f"server {route}", xs))
    print(f"\n| N = {a.entries:,} | median ms | max ms | runs |\n|---|---|---|---|")
    for label, xs in rows:
        print(f"| {label} | {statistics.median(xs):.0f} | {max(xs):.0f} | {len(xs)} |")
    print(f"\nload average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
