"""The bash aligner: adapt an OS exemplar's literals only when the mapping is complete and
consistent, else fall back to the exemplar with its own task (issue 23, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator.curate.aligners import ALIGNERS, create_aligner
from memcurator.curate.base import CurateContext
from memcurator.curate.distill import render_raw
from memcurator.curate.extractive import extract_noted
from memcurator.curate.jitmem import JitMemCurator
from memcurator.envs.os import load_os_tasks
from memcurator.envs.os.align import BashAligner
from memcurator.envs.os.data import OSTask
from memcurator.envs.os.families import families, reinstantiate
from memcurator.envs.os.sandbox import require_tools
from memcurator.types import Entry, Step, Task, Trajectory


def stored(instruction: str, *scripts: str) -> str:
    steps = [Step("" if i == 0 else "out", s) for i, s in enumerate(scripts)]
    return render_raw(Task("x", instruction, "f"), Trajectory("x", steps, reward=1.0))


def run_align(exemplar: str, task: str) -> tuple[str, list[str]]:
    a = BashAligner()
    p = a.parse(exemplar)
    assert p is not None
    text, _, notes = extract_noted("align", task, "", [p], a)
    return text, notes


def test_bash_is_registered_lazily_and_sql_stays_the_default() -> None:
    assert {"bash", "sql"} <= set(ALIGNERS)
    assert isinstance(create_aligner("bash"), BashAligner)
    assert create_aligner("sql").whole_trajectory is False


# ------------------------------------------------------------------ the class that aligns
ALIGNS = [
    (  # group + users + directory: names and a path
        "Create group 'dev', add users 'ann' and 'bo' to it and make '/proj' group-owned.",
        "groupadd dev && usermod -aG dev ann && usermod -aG dev bo && chgrp dev /proj",
        "Create group 'ops', add users 'cy' and 'di' to it and make '/work' group-owned.",
        "groupadd ops && usermod -aG ops cy && usermod -aG ops di && chgrp ops /work",
    ),
    (  # a count and a permission literal, each once in task and script
        "Create 5 files in /data/in and set their mode to 640",
        "mkdir -p /data/in && for i in $(seq 5); do touch /data/in/f$i; done "
        "&& chmod 640 /data/in/*",
        "Create 8 files in /data/out and set their mode to 600",
        "mkdir -p /data/out && for i in $(seq 8); do touch /data/out/f$i; done "
        "&& chmod 600 /data/out/*",
    ),
    (  # a user whose home path holds the name; swapped names in one pass
        "Make user 'ann' the owner of /home/ann/notes and give 'bo' read access",
        "chown ann /home/ann/notes && setfacl -m u:bo:r /home/ann/notes",
        "Make user 'bo' the owner of /home/bo/notes and give 'ann' read access",
        "chown bo /home/bo/notes && setfacl -m u:ann:r /home/bo/notes",
    ),
    (  # a log path at the end of a sentence
        "Log the members of group 'qa' to /var/log/qa.log.",
        "getent group qa | cut -d: -f4 > /var/log/qa.log",
        "Log the members of group 'sre' to /var/log/sre.log.",
        "getent group sre | cut -d: -f4 > /var/log/sre.log",
    ),
]


@pytest.mark.parametrize("past,script,task,want", ALIGNS)
def test_a_consistent_fresh_literal_variant_is_adapted(
    past: str, script: str, task: str, want: str
) -> None:
    text, notes = run_align(stored(past, script), task)
    assert notes == []
    assert text == f"Task: {task}\nAction: {want}"


def test_every_round_of_a_multi_step_trajectory_is_adapted_and_shown() -> None:
    ex = stored(
        "Create group 'dev' and add user 'ann'", "ls /home", "groupadd dev\nusermod -aG dev ann"
    )
    text, notes = run_align(ex, "Create group 'ops' and add user 'bo'")
    assert notes == []
    assert text == (
        "Task: Create group 'ops' and add user 'bo'\nAction: ls /home\n"
        "Action: groupadd ops\nusermod -aG ops bo"
    )


# ------------------------------------------------------------------ the class that must fall back
FALLS_BACK = [
    ("another request",  # same literal shape, other request
     "Create group 'dev' and add user 'ann' to it", "groupadd dev && usermod -aG dev ann",
     "Delete user 'bo' and remove its home directory", "another request"),
    ("count differs",
     "Add users 'ann' and 'bo' to group 'dev'", "usermod -aG dev ann && usermod -aG dev bo",
     "Add users 'cy' and also to group 'ops'", "differ in count"),
    ("two become one",
     "Add users 'ann' and 'bo' to group 'dev'", "usermod -aG dev ann && usermod -aG dev bo",
     "Add users 'cy' and 'cy' to group 'ops'", "would both become"),
    ("literal absent from script",
     "Write 'hello' into /tmp/x/a.txt for user 'ann'", "echo hi > /tmp/x/a.txt",
     "Write 'bye' into /tmp/x/a.txt for user 'ann'", "no counterpart"),
    ("ambiguous number",
     "Keep the 5 newest files of /logs/a", "ls -t /logs/a | tail -n +5 | head -n 5",
     "Keep the 7 newest files of /logs/b", "ambiguous"),
    ("unquoted name",
     "Create a user named carl with a home directory in /home", "useradd -m carl",
     "Create a user named dave with a home directory in /home", "not in the task"),
    ("derived name",
     "Create user 'ann' and a file for it in /srv", "useradd ann && touch /srv/ann_notes",
     "Create user 'bo' and a file for it in /srv", "longer name"),
    ("name inside a system path",
     "Create group 'audit' and add user 'ann'",
     "groupadd audit && usermod -aG audit ann && ls /var/log/audit",
     "Create group 'ops' and add user 'bo'", "system path"),
    ("new value collides",
     "Create group 'dev' and add user 'ann'", "groupadd dev && usermod -aG dev ann && id bo",
     "Create group 'ops' and add user 'bo'", "already occurs"),
    ("unsafe new value",
     "Write 'hello' to /srv/a.txt", "echo hello > /srv/a.txt",
     "Write 'good bye' to /srv/a.txt", "quoting"),
]  # fmt: skip


@pytest.mark.parametrize("case,past,script,task,why", FALLS_BACK, ids=[c[0] for c in FALLS_BACK])
def test_an_incomplete_or_inconsistent_mapping_falls_back_to_the_exemplar_with_its_own_task(
    case: str, past: str, script: str, task: str, why: str
) -> None:
    text, notes = run_align(stored(past, script), task)
    assert text.startswith(f"Task: {past}\nAction: ")  # honest: the exemplar's own task
    assert len(notes) == 1 and why in notes[0] and "fell back to closest" in notes[0], notes


def test_a_quoted_phrase_is_substituted_inside_matching_quotes() -> None:
    text, notes = run_align(
        stored("Write 'hello world' to /srv/a.txt", "echo 'hello world' > /srv/a.txt"),
        "Write 'good bye' to /srv/a.txt",
    )
    assert notes == [] and text.endswith("Action: echo 'good bye' > /srv/a.txt")


# ------------------------------------------------------------------ on the real data (no sandbox)
@pytest.fixture(scope="module")
def tasks() -> list[OSTask]:
    return list(load_os_tasks())


def _stored(t: OSTask) -> str:
    return stored(t.instruction, t.reference)


def test_other_tasks_of_the_same_family_and_other_families_never_align(
    tasks: list[OSTask],
) -> None:
    fams = families(tasks)
    by = {t.index: t for t in tasks}
    n = 0
    for f in fams[:10]:
        for a in f[:3]:
            for b in f[:3]:
                if a != b:
                    _, notes = run_align(_stored(by[a]), by[b].instruction)
                    assert notes, (a, b)
                    n += 1
    rng = np.random.default_rng(0)
    for _ in range(100):
        i, j = (int(x) for x in rng.choice(len(tasks), 2, replace=False))
        _, notes = run_align(_stored(tasks[i]), tasks[j].instruction)
        assert notes, (i, j)
    assert n >= 40


def test_most_fresh_literal_variants_align(tasks: list[OSTask]) -> None:
    rng = np.random.default_rng(0)
    aligned = total = 0
    for t in tasks[:120]:
        v = reinstantiate(t, rng)
        if v is None:
            continue
        total += 1
        _, notes = run_align(_stored(t), v.instruction)
        aligned += not notes
    assert total >= 100 and aligned >= 0.6 * total  # measured: 0.79 of all 474 variants


@pytest.mark.parametrize("index", [40, 21, 97, 86])
def test_aligned_scripts_pass_the_variant_check_in_the_sandbox(
    tasks: list[OSTask], index: int
) -> None:
    require_tools()
    from memcurator.envs.os.families import fresh_variant
    from memcurator.envs.os.protocol import replay

    # names and paths only: a changed mode that also occurs more often in the scripts than in
    # the task is declined as ambiguous (the aligner's rule), which is not what this tests
    v = fresh_variant(tasks[index], np.random.default_rng(index), modes=False)
    assert v is not None
    text, notes = run_align(_stored(tasks[index]), v.instruction)
    assert notes == [], notes
    p = BashAligner().parse(text)
    assert p is not None and p.task == v.instruction
    assert replay(v, "\n".join(p.actions)).correct
    assert not replay(v, tasks[index].reference).correct  # the unadapted script does not


def test_jitmem_curator_reads_bash_trajectories_through_the_bash_aligner() -> None:
    raw = stored("Create group 'dev' and add user 'ann'", "groupadd dev\nusermod -aG dev ann")
    e = Entry("e1", "ns", "raw", raw, 100, 100, np.zeros(2, dtype=np.float32))
    cur = JitMemCurator(operators=["align"], judge=False)
    ctx = CurateContext("Create group 'ops' and add user 'bo'", lambda q, k, where=None: [],
                        bank=lambda: [e], domain="bash")  # fmt: skip
    r = cur.curate(ctx)
    assert r.payload.endswith("Action: groupadd ops\nusermod -aG ops bo") and r.notes == []
