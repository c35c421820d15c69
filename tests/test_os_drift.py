"""Convention drift on the OS stream: schema drift's counterpart (issue 23, item 2)."""

from __future__ import annotations

import pytest

from memcurator.bench.agent import AgentConfig
from memcurator.bench.os_stream import build_os_stream
from memcurator.bench.report import run_metrics
from memcurator.bench.runner import BenchConfig, load_families, run_bench
from memcurator.bench.session import make_executor
from memcurator.bench.stream import StreamConfig
from memcurator.envs.os import OSTask, replay
from memcurator.envs.os.drift import (
    GROUP_PREFIX,
    LOG_DIR,
    applicable_kinds,
    change_convention,
    group_names,
    migrate,
)
from memcurator.envs.os.sandbox import require_tools
from memcurator.errors import InvalidInput


@pytest.mark.parametrize("index", [40, 63, 21, 16])
def test_group_prefix_renames_every_created_group_in_all_four_texts(
    tasks: dict[int, OSTask], index: int
) -> None:
    t = tasks[index]
    v = change_convention(t, "group-prefix")
    assert v is not None
    for g in group_names(t):
        assert f"'{GROUP_PREFIX}{g}'" in v.instruction or f"{GROUP_PREFIX}{g}" in v.instruction
        for old, new in ((t.check, v.check), (t.reference, v.reference)):
            if g in old:
                assert GROUP_PREFIX + g in new
    assert "root" not in group_names(t) and "sudo" not in group_names(t)


def test_log_dir_moves_every_var_log_path_and_creates_the_new_directory(
    tasks: dict[int, OSTask],
) -> None:
    touched = [t for t in tasks.values() if "log-dir" in applicable_kinds(t)][:6]
    assert len(touched) == 6
    for t in touched:
        v = change_convention(t, "log-dir")
        assert v is not None and "/var/log" not in v.instruction and LOG_DIR in v.instruction
        assert v.init.startswith(f"mkdir -p {LOG_DIR}")
        assert "/var/log" not in v.reference


def test_a_change_that_does_not_touch_a_task_is_none_and_unknown_kinds_are_refused() -> None:
    t = OSTask(0, "Count the files in /data", "", "test 1", "ls /data | wc -l")
    assert applicable_kinds(t) == [] and change_convention(t, "log-dir") is None
    with pytest.raises(InvalidInput, match="known"):
        change_convention(t, "shell")


DRIFTED = [(40, "group-prefix"), (63, "group-prefix"), (21, "group-prefix"), (0, "log-dir"),
           (17, "log-dir")]  # fmt: skip


@pytest.mark.parametrize("index,kind", DRIFTED)
def test_a_drifted_task_is_valid_and_its_pre_drift_solution_is_now_wrong(
    tasks: dict[int, OSTask], index: int, kind: str
) -> None:
    """Replayed in the real sandbox: the drifted reference passes the drifted check, the
    pre-drift reference (what an old exemplar holds) fails it."""
    require_tools()
    t = tasks[index]
    assert kind in applicable_kinds(t)
    m = migrate(t, (kind,))
    assert m is not None and m.kind == kind
    assert replay(m.task, m.task.reference).correct
    assert not replay(m.task, t.reference).correct
    assert replay(t, t.reference).correct  # and the old task itself was fine


def test_a_change_the_old_solution_still_passes_is_no_drift(tasks: dict[int, OSTask]) -> None:
    """Task 3's check never looks at the log directory: the pre-drift reference passes the
    changed check, so the change would make no victim and ``migrate`` refuses it."""
    require_tools()
    v = change_convention(tasks[3], "log-dir")
    assert v is not None and replay(v, tasks[3].reference).correct
    assert migrate(tasks[3], ("log-dir",)) is None


def test_the_os_stream_marks_victims_after_the_drift_step() -> None:
    require_tools()
    fams = load_families(env="os")
    cfg = StreamConfig(n_tasks=40, n_families=6, drift=0.5, env="os", payload="destroy",
                       poison=0)  # fmt: skip
    s = build_os_stream(cfg, fams)
    assert s.drifted and s.drift_step == 20
    for t in s.tasks:
        late = int(t.id[1:6]) >= s.drift_step
        assert (t.subset == "victim") == (late and t.family in s.drifted)
        if t.subset == "victim":
            ot = t.payload["os_task"]
            orig = next(f for f in fams if f.family == t.family)
            assert ot.instruction != orig.instruction and t.instruction == ot.instruction
    again = build_os_stream(cfg, fams)  # deterministic for a seed
    assert [x.instruction for x in again.tasks] == [x.instruction for x in s.tasks]


def test_the_drift_columns_of_a_fake_run_rest_on_victim_tasks() -> None:
    """A fake-executor run with drift: keep-all copies stale exemplars onto victim tasks, which
    then fail, and the report's victim accuracy rests on them."""
    require_tools()
    cfg = BenchConfig(
        policies=["keep-all"],
        seeds=[0],
        stream=StreamConfig(
            n_tasks=24, n_families=4, zipf=0.5, drift=1.0, poison=0, env="os", payload="destroy"
        ),  # fmt: skip
        agent=AgentConfig(max_turns=5, max_tokens=384),
        max_bytes=200_000,
    )
    run = run_bench(cfg, make_executor("fake", env="os"), families=load_families(env="os"))[0]
    m = run_metrics(run)
    victims = [r for r in run.records if r.subset == "victim"]
    assert m["n_victim"] == len(victims) > 0
    # the first victim task of each drifted family is shown only pre-drift exemplars: it fails
    first: dict[str, bool] = {}
    for r in victims:
        first.setdefault(r.family, r.local_ok)
    assert first and not any(first.values())
