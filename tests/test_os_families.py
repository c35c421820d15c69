"""Recurring OS task families and fresh-literal variants (issue 23, item 2)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from memcurator.envs.os import load_os_tasks
from memcurator.envs.os.data import OSTask
from memcurator.envs.os.families import families, fresh_variant, named_literals, reinstantiate
from memcurator.envs.os.sandbox import require_tools


@pytest.fixture(scope="module")
def tasks() -> list[OSTask]:
    return list(load_os_tasks())


@pytest.fixture(scope="module")
def fams(tasks: list[OSTask]) -> list[list[int]]:
    return families(tasks)


def test_the_largest_family_is_the_gpasswd_admin_directory_one(
    tasks: list[OSTask], fams: list[list[int]]
) -> None:
    assert len(fams[0]) >= 15 and {40, 63, 105, 114} <= set(fams[0])
    assert all("group" in tasks[i].instruction.lower() for i in fams[0])
    assert all(len(f) >= 2 for f in fams)
    assert len({i for f in fams for i in f}) == sum(len(f) for f in fams)  # disjoint


@pytest.mark.parametrize("index", [40, 7, 21, 28, 111, 175])
def test_renaming_is_consistent_across_all_four_scripts(tasks: list[OSTask], index: int) -> None:
    t = tasks[index]
    v = reinstantiate(t, np.random.default_rng(index))
    assert v is not None and v.instruction != t.instruction
    for lit in named_literals(t):
        pat = re.escape(lit) + (r"(?![\w-])" if lit.startswith("/") else r"\b")
        for old, new in ((t.instruction, v.instruction), (t.init, v.init), (t.check, v.check),
                         (t.reference, v.reference)):  # fmt: skip
            if not re.search(r"(?<![\w/.-])" + pat, old):
                continue
            assert not re.search(r"(?<![\w/.-])" + pat, new), (lit, new)
    assert "/bin/bash" not in {lit for lit in named_literals(t)}


def test_system_names_are_never_renamed(tasks: list[OSTask]) -> None:
    for t in tasks:
        lits = named_literals(t)
        assert not {"root", "sudo", "/bin/bash", "/etc/passwd"} & set(lits), t.index


def test_fresh_variants_pass_the_validity_rule(tasks: list[OSTask], fams: list[list[int]]) -> None:
    require_tools()
    rng = np.random.default_rng(0)
    for i in [*fams[0][:3], fams[1][0], fams[2][0]]:
        v = fresh_variant(tasks[i], rng)
        assert v is not None, i  # measured: 21 of the largest family's 21 give a valid variant
        assert v.instruction != tasks[i].instruction


def test_a_variant_that_breaks_its_check_is_dropped(tasks: list[OSTask]) -> None:
    require_tools()
    from memcurator.envs.os.protocol import check_validity

    t = tasks[40]
    v = reinstantiate(t, np.random.default_rng(1))
    assert v is not None
    broken = OSTask(v.index, v.instruction, v.init, v.check, t.reference, v.skills)
    assert not check_validity(broken).valid  # the old literals no longer solve the new task
