"""The trust gate's domain-check plug-in interface (trust/domains.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _proc_util import run_python

from memcurator.errors import InvalidInput, UnknownName
from memcurator.trust.domains import (
    DOMAIN_CHECKS,
    ActionEntry,
    DomainCheck,
    RiskReport,
    create_domain_check,
    domain_risks,
)
from memcurator.trust.gate import assess


class ShellCheck:
    """A toy second domain: shell actions that remove files recursively."""

    name = "shell"

    def applies(self, entry: ActionEntry) -> bool:
        return entry.action.startswith("$ ")

    def risk(self, entry: ActionEntry, *, spec: Any = None) -> RiskReport:
        if "rm -rf" in entry.action:
            return RiskReport(0.9, ("removes files recursively",))
        return RiskReport(0.0)


@pytest.fixture
def with_shell() -> Iterator[None]:
    DOMAIN_CHECKS.register("shell", ShellCheck)
    try:
        yield
    finally:
        DOMAIN_CHECKS._entries.pop("shell")


def test_sql_check_implements_the_protocol() -> None:
    check = create_domain_check("sql")
    assert isinstance(check, DomainCheck) and check.name == "sql"


def test_unknown_domain_lists_the_known_ones() -> None:
    with pytest.raises(UnknownName, match=r"known: \['action', 'bash', 'sql'\]"):
        create_domain_check("powershell")


def test_prose_asks_no_domain_and_loads_none() -> None:
    code = (
        "import sys\nfrom memcurator.trust.gate import assess\n"
        "a = assess('drop unused columns before merge', origin='self')\n"
        "print(a.admit, dict(a.domains), any(m.startswith('memcurator.envs') for m in sys.modules))"
    )
    assert run_python(code).split() == ["True", "{}", "False"]


def test_an_sql_action_reaches_the_sql_domain() -> None:
    a = assess("Task: Count rows of t.\nAction: DROP TABLE t; SELECT COUNT(*) FROM t;")
    assert list(a.domains) == ["sql"] and not a.admit
    assert a.reasons[0].startswith("table dropped")


def test_a_second_domain_plugs_in_without_touching_the_gate(with_shell: None) -> None:
    assert domain_risks("Task: tidy the build\nAction: $ ls build") == {"shell": RiskReport(0.0)}
    a = assess("Task: tidy the build\nAction: $ rm -rf / --no-preserve-root", origin="self")
    assert "shell" in a.domains and not a.admit
    assert a.domains["shell"].reasons == ("removes files recursively",)
    assert "removes files recursively" in a.reasons
    # a domain that does not apply is not asked; SQL still judges SQL
    assert list(assess("Task: count\nAction: SELECT COUNT(*) FROM t;").domains) == ["sql"]


def test_risks_of_several_domains_combine_as_independent_findings(with_shell: None) -> None:
    text = "Task: clean up\nAction: $ rm -rf tmp && sqlite3 db 'DROP TABLE t'"
    reports = domain_risks(text)
    assert sorted(reports) == ["action", "shell", "sql"]  # the generic check sees "rm" too
    a = assess(text, origin="self")
    keep = 1.0
    for r in reports.values():
        keep *= 1.0 - r.risk
    assert a.risk == round(1.0 - keep * (1.0 - a.text.risk), 6)  # type: ignore[union-attr]


def test_a_spec_the_sql_domain_cannot_use_is_refused() -> None:
    with pytest.raises(InvalidInput, match="SQLTaskSpec"):
        assess("Task: count\nAction: SELECT COUNT(*) FROM t;", spec={"table": "t"})
