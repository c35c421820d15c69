"""Shared by the inspector's browser test and screenshot/benchmark scripts: a served store with
keys of two tenants, and a headless Debian chromium driven by Selenium through chromedriver
(explicit paths: Selenium Manager never downloads a browser or a driver)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: scopes of each test key: (namespace, name, scopes, origin)
KEYS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "admin": ("a", "alice", ("read", "write", "admin", "peer"), "self"),
    "reader": ("a", "reader", ("read",), "self"),
    "crawler": ("a", "crawler", ("read", "write"), "external"),
    "other": ("b", "bob", ("read", "write", "admin", "peer"), "self"),
}


def chromium_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) from PATH, or None when either is missing."""
    b = shutil.which("chromium") or shutil.which("chromium-browser")
    d = shutil.which("chromedriver")
    return (b, d) if b and d else None


def make_keys(path: str) -> dict[str, str]:
    """Create :data:`KEYS` in the key file ``path``; returns their tokens."""
    from memcurator.service.keys import KeyTable

    t = KeyTable(path)
    out = {}
    for who, (ns, name, scopes, origin) in KEYS.items():
        _, out[who] = t.create(ns, name=name, scopes=scopes, origin=origin)
    t.close()
    return out


def browser(profile: Path, width: int = 1280, height: int = 900) -> Any:
    """A headless chromium whose every network request is kept in its performance log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = chromium_paths()
    assert paths is not None, "chromium and chromedriver are needed (.ci/run installs them)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = paths[0]
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(executable_path=paths[1]))


def requested_urls(driver: Any) -> list[str]:
    """Every URL the page asked for since the last call (CDP ``Network.requestWillBeSent``
    from the performance log, which this call drains)."""
    urls = []
    for row in driver.get_log("performance"):
        msg = json.loads(row["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def foreign(urls: list[str]) -> list[str]:
    """The URLs that would leave 127.0.0.1 (data:, blob: and about: stay in the page; chrome:
    is the browser's own new-tab page, read from its binary)."""
    out = []
    for u in urls:
        p = urlsplit(u)
        if p.scheme in ("data", "blob", "about", "chrome"):
            continue
        if p.hostname != "127.0.0.1":
            out.append(u)
    return out
