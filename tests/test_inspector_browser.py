"""The inspector (``/ui``) in a real headless chromium against ``memcurator serve`` (issue 34).

One server and one browser for the module. Each test writes through the API, then finds what it
wrote in the page; an autouse check asserts that every request the browser made went to
127.0.0.1 (the CDP performance log records each one).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _inspector_util import browser, chromium_paths, foreign, make_keys, requested_urls  # noqa: E402

if chromium_paths() is None:
    if os.environ.get("CI") == "true":
        pytest.fail("chromium and chromedriver must be installed in CI (.ci/run)", pytrace=False)
    pytest.skip("chromium/chromedriver not installed", allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT_S = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from memcurator.service.launch import ServeProcess

    d = tmp_path_factory.mktemp("inspector")
    store = str(d / "store.db")
    tokens = make_keys(store + ".keys")
    with ServeProcess(store, keys=store + ".keys", log_path=str(d / "server.log")) as sp:
        yield {"url": sp.url, "tok": tokens, "dir": d, "proc": sp}
        log = sp.log(100_000)
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def drv(server: dict[str, Any]) -> Iterator[Any]:
    b = browser(server["dir"] / "profile")
    b.set_page_load_timeout(WAIT_S)
    try:
        yield b
    finally:
        b.quit()


@pytest.fixture(autouse=True)
def _only_localhost(drv: Any) -> Iterator[None]:
    yield
    urls = requested_urls(drv)
    assert any(u.startswith("http://127.0.0.1:") for u in urls)  # the log does record requests
    assert foreign(urls) == [], foreign(urls)


def api(server: dict[str, Any], who: str, method: str, path: str, **kw: Any) -> httpx.Response:
    h = {"Authorization": f"Bearer {server['tok'][who]}"}
    return httpx.request(method, server["url"] + path, headers=h, timeout=30, **kw)


def write(server: dict[str, Any], who: str, text: str) -> dict[str, Any]:
    r = api(server, who, "POST", "/v1/write", json={"text": text})
    assert r.status_code == 200, r.text
    return dict(r.json())


def login(drv: Any, server: dict[str, Any], who: str) -> None:
    """Open /ui, type the key once, wait for the overview."""
    drv.get(server["url"] + "/ui")
    drv.execute_script("sessionStorage.clear(); location.hash = '#/overview'")
    drv.refresh()  # a new document: nothing of the last key is left in the page
    box = WebDriverWait(drv, WAIT_S).until(
        lambda d: (
            d.find_element(By.ID, "key") if d.find_element(By.ID, "key").is_displayed() else None
        )
    )
    box.send_keys(server["tok"][who])
    drv.find_element(By.CSS_SELECTOR, "#keyform button").click()
    ready(drv, "overview")


def ready(drv: Any, page: str) -> None:
    WebDriverWait(drv, WAIT_S).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == page
    )


def goto(drv: Any, hash_: str) -> None:
    drv.execute_script("location.hash = arguments[0]", hash_)
    ready(drv, hash_.split("?")[0].split("/")[1])


TEXTS = [
    "Task: list the invoices of March for customer 17\n"
    "Action: SELECT * FROM invoices WHERE month = 3 AND customer_id = 17;",
    "Task: count the open support tickets\nAction: SELECT COUNT(*) FROM tickets WHERE open = 1;",
    "Task: name the five largest orders\n"
    "Action: SELECT id FROM orders ORDER BY total DESC LIMIT 5;",
    "Task: average salary per department\n"
    "Action: SELECT dept, AVG(salary) FROM staff GROUP BY dept;",
]


def test_written_entry_is_found_in_the_page(drv: Any, server: dict[str, Any]) -> None:
    ids = [write(server, "admin", t)["id"] for t in TEXTS]
    login(drv, server, "admin")
    assert drv.find_element(By.ID, "whotext").text.startswith("alice @ a")
    assert drv.find_element(By.ID, "nentries").text.endswith(str(len(TEXTS)))
    assert "no budget" in drv.find_element(By.ID, "budget").text
    WebDriverWait(drv, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#plot svg path"))
    # search by a word of the text: the server filters, the page shows the one row
    goto(drv, "#/entries?q=invoices")
    rows = drv.find_elements(By.CSS_SELECTOR, "#entries tbody tr")
    assert [r.get_attribute("data-id") for r in rows] == [ids[0]]
    assert drv.find_element(By.ID, "entrycount").text == "1–1 of 1"
    rows[0].click()
    ready(drv, "entry")
    assert drv.find_element(By.ID, "entrytext").text == TEXTS[0]
    prov = drv.find_element(By.ID, "provenance").text
    assert "alice" in prov and "signed by the service" in prov
    tl = drv.find_elements(By.CSS_SELECTOR, "#entrydecisions li")
    assert [li.get_attribute("data-action") for li in tl] == ["admit"]
    assert "explain: trust gate" in tl[0].text
    # its feedback: none yet, and the log keeps no row per feedback call (said in the page)
    counts = drv.find_element(By.ID, "feedbackcounts").text
    assert "uses\n0" in counts and "failures\n0" in counts
    assert "No outcome wrote a row" in drv.find_element(By.ID, "feedbackrows").text
    assert "keeps no row per feedback call" in drv.find_element(By.ID, "feedback").text
    # the value terms of the namespace's policy (curator: rho and its parts)
    value = WebDriverWait(drv, WAIT_S).until(lambda d: d.find_elements(By.ID, "value"))
    assert "rho" in value[0].text


def test_probation_queue_release_by_admin_only(drv: Any, server: dict[str, Any]) -> None:
    text = (
        "Task: list the customers in Paris\nAction: SELECT name FROM customers WHERE city='Paris';"
    )
    r = write(server, "crawler", text)
    assert r["admitted"] and "on probation" in r["reason"]
    eid = r["id"]
    # a read-only key sees the queue, and no action
    login(drv, server, "reader")
    goto(drv, "#/trust")
    assert drv.find_elements(By.CSS_SELECTOR, f'#probation tr[data-id="{eid}"]')
    assert drv.find_elements(By.CSS_SELECTOR, "button.release, button.forget") == []
    assert "no admin scope" in drv.find_element(By.ID, "readonly").text
    # ... and the API refuses it anyway
    for what in ("release", "forget"):
        refused = api(
            server, "reader", "POST", f"/ui/api/probation/{eid}/{what}", params={"reason": "x"}
        )
        assert refused.status_code == 403, refused.text
    still = api(server, "admin", "GET", f"/ui/api/entries/{eid}").json()
    assert still["trust"]["state"] == "probation"
    # the admin key releases it from the page, with a reason
    login(drv, server, "admin")
    goto(drv, "#/trust")
    row = drv.find_element(By.CSS_SELECTOR, f'#probation tr[data-id="{eid}"]')
    reason = row.find_element(By.CSS_SELECTOR, "input")
    reason.clear()
    reason.send_keys("read it: a plain lookup")
    drv.execute_script("delete document.body.dataset.ready")
    row.find_element(By.CSS_SELECTOR, "button.release").click()
    ready(drv, "trust")
    assert drv.find_elements(By.CSS_SELECTOR, f'#probation tr[data-id="{eid}"]') == []
    after = api(server, "admin", "GET", f"/ui/api/entries/{eid}").json()
    assert after["trust"]["state"] == "released"
    log = api(server, "admin", "GET", "/v1/decisions", params={"action": "corroborate"}).json()
    rows = [d for d in log["decisions"] if d["entry_id"] == eid]
    assert len(rows) == 1 and "admin key 'alice'" in rows[0]["reason"]
    assert "read it: a plain lookup" in rows[0]["reason"]
    # released: recall may return it now
    got = api(server, "reader", "POST", "/v1/recall", json={"query": "customers in Paris", "k": 1})
    assert got.json()["ids"] == [eid]


def test_recall_playground_ranks_with_scores(drv: Any, server: dict[str, Any]) -> None:
    login(drv, server, "reader")
    goto(drv, "#/recall")
    drv.find_element(By.ID, "r-query").send_keys("open support tickets count")
    k = drv.find_element(By.ID, "r-k")
    k.clear()
    k.send_keys("3")
    drv.find_element(By.ID, "r-go").click()
    WebDriverWait(drv, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#candidates tr"))
    rows = drv.find_elements(By.CSS_SELECTOR, "#candidates tbody tr")
    assert len(rows) == 3
    cells = [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")]
    assert "support tickets" in cells[2]
    score, dense, lexical = (float(x) for x in cells[3:6])
    assert 0 < dense <= 1 and 0 <= lexical <= 1 and score >= dense
    assert "on probation: 0" in drv.find_element(By.ID, "removed").text
    # the same ranking as the API's recall (the playground observes nothing)
    ids = api(
        server,
        "reader",
        "POST",
        "/v1/recall",
        json={"query": "open support tickets count", "k": 3, "observe": False},
    ).json()["ids"]
    assert [r.find_element(By.CSS_SELECTOR, "a").text for r in rows] == ids
    # what the model would be given: this policy has no read-time curator, so the top-k texts
    assert "injects the top-k texts as they are" in drv.find_element(By.ID, "inject-note").text
    assert "support tickets" in drv.find_element(By.ID, "inject-payload").text
    drawn = drv.find_elements(By.CSS_SELECTOR, "#inject a")
    assert [a.text for a in drawn] == ids


def test_eviction_and_its_reason_after_the_budget_bites(drv: Any, server: dict[str, Any]) -> None:
    ns = api(server, "admin", "GET", "/v1/namespaces/a").json()
    budget = ns["used_bytes"] // 2
    r = api(server, "admin", "PATCH", "/v1/namespaces/a", json={"max_bytes": budget})
    assert r.status_code == 200 and r.json()["used_bytes"] <= budget
    evicted = api(server, "admin", "GET", "/v1/decisions", params={"action": "evict"}).json()
    gone = {d["entry_id"] for d in evicted["decisions"]}
    assert gone
    login(drv, server, "reader")
    assert "/ " + f"{budget:,}" in drv.find_element(By.ID, "budget").text
    goto(drv, "#/decisions?action=evict")
    items = drv.find_elements(By.CSS_SELECTOR, "#timeline li")
    assert {li.get_attribute("data-action") for li in items} == {"evict"}
    assert len(items) == len(gone)
    first = items[0]
    assert "byte budget" in first.find_element(By.CSS_SELECTOR, ".reason").text
    assert "removed to keep the byte budget" in first.find_element(By.CSS_SELECTOR, ".words").text
    link = first.find_element(By.CSS_SELECTOR, "a.term")
    assert link.text == "explain: evictions"
    # the entry's own page says it is gone, and why
    first.find_element(By.CSS_SELECTOR, ".head a.mono").click()
    ready(drv, "entry")
    assert drv.find_elements(By.ID, "gone")
    acts = [
        li.get_attribute("data-action")
        for li in drv.find_elements(By.CSS_SELECTOR, "#entrydecisions li")
    ]
    assert acts[0] == "admit" and acts[-1] == "evict"
    # the glossary term the row links to is there
    goto(drv, "#/glossary/evictions")
    assert drv.find_element(By.ID, "term-evictions").get_attribute("class") == "hl"


def test_another_tenant_sees_nothing_of_the_first(drv: Any, server: dict[str, Any]) -> None:
    a_ids = [e["id"] for e in api(server, "admin", "GET", "/v1/entries").json()["entries"]]
    assert a_ids
    login(drv, server, "other")
    assert drv.find_element(By.ID, "nentries").text.endswith("0")
    goto(drv, "#/entries")
    assert drv.find_elements(By.CSS_SELECTOR, "#entries tbody tr") == []
    assert drv.find_element(By.ID, "entrycount").text == "no entry matches"
    goto(drv, "#/decisions")
    assert drv.find_element(By.ID, "timeline").text == "no decision matches"
    goto(drv, "#/entry/" + a_ids[0])
    assert "404" in drv.find_element(By.CSS_SELECTOR, ".err").text
    goto(drv, "#/trust")
    assert drv.find_element(By.ID, "probcount").text == "0 on probation"
    page = drv.page_source
    assert not any(i in page for i in a_ids)
    assert not any(t.split("\n")[0] in page for t in TEXTS)


def test_phone_width_keeps_the_page_within_the_screen(drv: Any, server: dict[str, Any]) -> None:
    login(drv, server, "admin")
    try:
        drv.set_window_size(390, 844)
        for h in ("#/overview", "#/entries", "#/decisions", "#/trust", "#/recall"):
            goto(drv, h)
            width = drv.execute_script("return document.documentElement.scrollWidth")
            inner = drv.execute_script("return window.innerWidth")
            assert width <= inner, (h, width, inner)
    finally:
        drv.set_window_size(1280, 900)


def test_docs_render_offline(drv: Any, server: dict[str, Any]) -> None:
    drv.get(server["url"] + "/docs")
    WebDriverWait(drv, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock-tag")
    )
    assert "memcurator" in drv.find_element(By.CSS_SELECTOR, ".swagger-ui .info").text
    assert drv.find_elements(By.CSS_SELECTOR, "#operations-tag-memory")
    assert api(server, "admin", "GET", "/redoc").status_code == 404


SHOTS = [
    ("overview", "#/overview"),
    ("entries", "#/entries"),
    ("decisions", "#/decisions"),
    ("trust", "#/trust"),
    ("recall", "#/recall"),
]


def test_every_view_renders_at_laptop_and_phone_width(
    drv: Any, server: dict[str, Any], tmp_path: Path
) -> None:
    """Screenshots of each view at 1280 and 390 px are not blank (text, lines, a plot).

    With ``MEMCURATOR_INSPECTOR_SHOTS=DIR`` they are also kept there (docs/inspector/)."""
    from PIL import Image

    api(server, "admin", "PATCH", "/v1/namespaces/a", json={"max_bytes": 60_000})
    for t in TEXTS:  # (again, when run alone: a rewrite only reinforces)
        api(server, "admin", "POST", "/v1/write", json={"text": t})
    write(server, "crawler", "Task: list the suppliers in Lyon\nAction: SELECT * FROM suppliers;")
    keep = os.environ.get("MEMCURATOR_INSPECTOR_SHOTS")
    login(drv, server, "admin")
    try:
        for width, height in ((1280, 900), (390, 844)):
            drv.set_window_size(width, height)
            for name, h in SHOTS:
                goto(drv, h)
                if name == "overview":
                    WebDriverWait(drv, WAIT_S).until(
                        lambda d: d.find_elements(By.CSS_SELECTOR, "#plot svg path")
                    )
                if name == "recall":
                    drv.find_element(By.ID, "r-query").send_keys("count the support tickets")
                    drv.find_element(By.ID, "r-go").click()
                    WebDriverWait(drv, WAIT_S).until(
                        lambda d: d.find_elements(By.CSS_SELECTOR, "#candidates tr")
                    )
                shot = tmp_path / f"{name}-{width}.png"
                assert drv.save_screenshot(str(shot))
                img = Image.open(shot).convert("L")
                assert img.size[0] == width
                colors = img.getcolors(maxcolors=1 << 16) or []
                assert len(colors) > 20, name  # not a blank page
                dark = sum(n for n, v in colors if v < 128)
                assert dark > 0.002 * img.size[0] * img.size[1], name
                if keep:
                    Path(keep).mkdir(parents=True, exist_ok=True)
                    Image.open(shot).save(Path(keep) / shot.name, optimize=True)
    finally:
        drv.set_window_size(1280, 900)


def test_peers_show_traffic_and_reputation(drv: Any, server: dict[str, Any]) -> None:
    entry = {"text": TEXTS[0], "kind": "insight", "bytes": 100, "q": 0.5, "a": 1.0,
             "rho_s": 0.1, "source_id": "s1"}  # fmt: skip
    r = api(server, "admin", "POST", "/v1/hub/push", json={"entries": [entry]})
    assert r.status_code == 200, r.text
    login(drv, server, "admin")
    goto(drv, "#/peers")
    rows = drv.find_elements(By.CSS_SELECTOR, "#peers tbody tr")
    cells = {
        r.find_element(By.TAG_NAME, "td").text: r.find_elements(By.TAG_NAME, "td") for r in rows
    }
    alice = [c.text for c in cells["alice"]]
    assert alice[1] == "1" and alice[2] == "1"  # one message, one entry pushed
    assert alice[8:] == ["0.100", "0.500", "0", "no"]  # a new peer's reputation: Beta(1, 1)
    assert "Beta posterior" in drv.find_element(By.ID, "repnote").text
