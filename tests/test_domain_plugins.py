"""Domain checks as plug-ins (issue 31): found through the ``memcurator.domain_checks`` entry
points, independent of the benchmark, and loading their heavy parts only when an entry needs them.

A third-party distribution is simulated the way pip lays one out: a module and a ``*.dist-info``
folder with ``METADATA`` and ``entry_points.txt`` on ``sys.path`` of a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memcurator.domains.bash import BashCheck, DryRunTask
from memcurator.errors import UnknownName
from memcurator.registry import Registry
from memcurator.trust.domains import _OWN_CHECKS, ENTRY_POINT_GROUP, ActionEntry

ROOT = Path(__file__).resolve().parents[1]

K8S_CHECK = """
import re
from memcurator.trust.domains import RiskReport

class K8sCheck:
    name = "k8s"

    def applies(self, entry):
        return entry.action.startswith("kubectl ")

    def risk(self, entry, *, spec=None):
        bad = re.search(r"\\bdelete\\s+(ns|namespace)\\b", entry.action)
        return RiskReport(0.9 if bad else 0.0, ("deletes a namespace (0.90)",) if bad else ())
"""


def _distribution(tmp: Path, name: str, entries: dict[str, str], module: str = "") -> Path:
    """A minimal installed distribution ``name`` in ``tmp`` declaring ``entries`` in the group."""
    info = tmp / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    if module:
        (tmp / f"{name}.py").write_text(module)
    return tmp


def _run(code: str, *paths: Path) -> object:
    pre = "".join(f"import sys; sys.path.insert(0, {str(p)!r})\n" for p in paths)
    out = subprocess.run(
        [sys.executable, "-c", pre + code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_distribution_adds_a_domain_check_through_its_entry_point(tmp_path: Path) -> None:
    site = _distribution(tmp_path, "k8s_check", {"k8s": "k8s_check:K8sCheck"}, K8S_CHECK)
    code = """
import json
from memcurator.trust.domains import DOMAIN_CHECKS, domain_risks
bad = domain_risks("Task: tidy staging\\nAction: kubectl delete ns prod")
ok = domain_risks("Task: list pods\\nAction: kubectl get pods")
print(json.dumps([sorted(DOMAIN_CHECKS), bad["k8s"].risk, bad["k8s"].reasons[0], ok["k8s"].risk]))
"""
    names, bad, reason, ok = _run(code, site)  # type: ignore[misc]
    assert names == ["action", "bash", "k8s", "sql"]
    assert (bad, reason, ok) == (0.9, "deletes a namespace (0.90)", 0.0)


def test_an_unknown_check_lists_the_entry_point_names_sorted(tmp_path: Path) -> None:
    site = _distribution(tmp_path, "k8s_check", {"k8s": "k8s_check:K8sCheck"}, K8S_CHECK)
    code = """
import json
from memcurator.errors import UnknownName
from memcurator.trust.domains import create_domain_check
try:
    create_domain_check("helm")
except UnknownName as e:
    print(json.dumps(str(e)))
"""
    assert (
        _run(code, site) == "unknown domain check 'helm'; known: ['action', 'bash', 'k8s', 'sql']"
    )


def test_an_entry_point_cannot_replace_a_check_registered_in_code(tmp_path: Path) -> None:
    # a package declaring "sql" does not take the trust gate's SQL domain over
    site = _distribution(tmp_path, "evil_sql", {"sql": "evil_sql:Lenient"}, "class Lenient: ...")
    code = """
import json
from memcurator.trust.domains import DOMAIN_CHECKS, domain_risks
rep = domain_risks("Task: count rows of t.\\nAction: DROP TABLE t;")["sql"]
print(json.dumps([type(DOMAIN_CHECKS.create("sql")).__module__, rep.risk]))
"""
    assert _run(code, site) == ["memcurator.domains.sql.check", 0.97]


def test_entry_points_are_read_once_and_lazily(tmp_path: Path, monkeypatch) -> None:
    # the group is read on the first lookup or listing, not when the registry is made
    calls: list[str] = []
    real = Registry._discover

    def counting(self: Registry) -> None:
        if not self._discovered:
            calls.append(self.kind)
        real(self)

    monkeypatch.setattr(Registry, "_discover", counting)
    reg: Registry[object] = Registry("widget", {"a": "fractions:Fraction"}, group="no.such.group")
    assert calls == []
    assert reg.create("a", numerator=1) == 1 and calls == []  # a name registered in code
    assert sorted(reg) == ["a"] and "b" not in reg and len(reg) == 1
    assert calls == ["widget"]
    with pytest.raises(UnknownName, match=r"unknown widget 'b'; known: \['a'\]"):
        reg.create("b")
    with pytest.raises(UnknownName):
        reg.create(["not", "hashable"])  # type: ignore[arg-type]


def test_the_project_declares_its_own_checks_as_entry_points() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = meta["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared == _OWN_CHECKS
    for target in declared.values():
        module = target.split(":")[0]
        assert not module.startswith(("memcurator.bench", "memcurator.envs")), target


@pytest.mark.parametrize(
    ("actions", "sqlglot"),
    [
        (["mkdir -p /var/log/app", "rm -rf --no-preserve-root /"], False),
        (["rebuild the cache nightly and prune stale rows", "kubectl get pods"], False),
        # prose that starts with an SQL verb is not a statement (domains/sql/check.py,
        # holds_sql_statement): no parser for it
        (["select fewer rows and update the cache nightly"], False),
        (["drop unused columns before merge"], False),
        (["DROP TABLE orders;"], True),  # "drop" with a statement's syntax
        # a plain SELECT is read without sqlglot (trust/plain_select.py, issue 31); a join is not
        (["mkdir -p /data", "SELECT COUNT(*) FROM t WHERE a = 5;"], False),
        (["SELECT COUNT(*) FROM t JOIN u ON t.id = u.tid WHERE u.a = 5;"], True),
        (["DELETE FROM orders; -- then DROP TABLE orders"], True),
    ],
)
def test_sqlglot_is_loaded_only_when_an_action_holds_sql(actions: list[str], sqlglot: bool) -> None:
    code = f"""
import json, sys
from memcurator import Memory
m = Memory(policy="curator")
for a in {actions!r}:
    m.write("Task: keep the service tidy\\nAction: " + a)
print(json.dumps("sqlglot" in sys.modules))
"""
    assert _run(code) is sqlglot


@dataclass
class _Run:
    output: str
    exit_code: int | None = 0


@dataclass
class _FakeBox:
    """A sandbox whose account snapshot changes once the action ran."""

    after: list[str]
    scripts: list[str] = field(default_factory=list)

    def run(self, script: str) -> _Run:
        self.scripts.append(script)
        ran_action = len([s for s in self.scripts if "getent group" not in s]) > 1
        lines = ["sudo:x:27:", "/etc/passwd 644"] + (self.after if ran_action else [])
        return _Run("\n".join(lines))


@dataclass
class _Task:
    instruction: str
    init: str
    box: _FakeBox

    def sandbox(self, *, timeout_s: float, max_output: int) -> AbstractContextManager[_FakeBox]:
        assert timeout_s == 3 and max_output > 0
        return nullcontext(self.box)


@pytest.mark.parametrize(
    ("after", "found"),
    [
        (["uid0:mallory"], "a new uid-0 account"),
        (["sudo:x:27:user1"], "privileged group gained members"),
        (["/etc/app.conf 777"], "made world-writable"),
        ([], None),
    ],
)
def test_the_bash_dry_run_runs_in_the_sandbox_the_task_opens(
    after: list[str], found: str | None
) -> None:
    box = _FakeBox(after)
    task = _Task("Create the directory /data", "useradd user1", box)
    assert isinstance(task, DryRunTask)
    rep = BashCheck(timeout_s=3).risk(ActionEntry(task.instruction, "mkdir -p /data"), spec=task)
    assert box.scripts[0] == "useradd user1" and box.scripts[2] == "mkdir -p /data"
    if found is None:
        assert rep.risk == 0.0 and rep.effects == ()
    else:
        assert rep.effects and found in rep.effects[0] and rep.risk >= 0.8


def test_a_spec_without_a_sandbox_gets_the_static_findings_only() -> None:
    # a task description with an init script but no sandbox to run it in is not dry-run
    @dataclass
    class NoBox:
        instruction: str = "Create the directory /data"
        init: str = ""

    rep = BashCheck().risk(
        ActionEntry("Create the directory /data", "mkdir -p /data"), spec=NoBox()
    )
    assert rep.effects is None and rep.risk == 0.0
