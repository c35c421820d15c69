"""The ``--env os`` stream draws fresh-literal variants of its families (issue 23, item 2).

Tests that need the sandbox call :func:`require_tools` first: without bubblewrap they fail,
never skip.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from memcurator.bench.agent import AgentConfig
from memcurator.bench.os_stream import FALLBACK_REASONS, VARIANT_TRIES, build_os_stream
from memcurator.bench.report import run_metrics
from memcurator.bench.runner import BenchConfig, load_families, run_bench
from memcurator.bench.session import make_executor
from memcurator.bench.stream import StreamConfig
from memcurator.envs.os import OSTask, replay
from memcurator.envs.os.drift import GROUP_PREFIX, LOG_DIR
from memcurator.envs.os.families import (
    fresh_variant,
    mode_literals,
    named_literals,
    reinstantiate,
)
from memcurator.envs.os.protocol import check_validity
from memcurator.envs.os.sandbox import require_tools
from memcurator.envs.os.validity_cache import VerdictCache


def _word(lit: str, text: str) -> bool:
    return re.search(rf"(?<![\w\-.]){re.escape(lit)}(?![\w\-])", text) is not None


def _texts(t: OSTask) -> str:
    return "\n".join((t.instruction, t.init, t.check, t.reference))


# several members of the class, one per kind of literal: a group and a path under /var/log
# (381), a user and a symlink name (158), a top-level directory (77), two groups and a user
# (226), a group, two users and a project directory (40), a file path under a directory (63)
KINDS = [(381, "group"), (158, "user"), (77, "path"), (226, "groups"), (40, "users"),
         (63, "file")]  # fmt: skip


@pytest.mark.parametrize("index,kind", KINDS)
def test_a_fresh_variant_renames_every_literal_consistently_and_passes_the_validity_rule(
    tasks: dict[int, OSTask], index: int, kind: str, tmp_path: Path
) -> None:
    require_tools()
    base = tasks[index]
    lits = named_literals(base)
    assert lits, kind
    v = fresh_variant(base, np.random.default_rng(7), cache=VerdictCache(tmp_path))
    assert v is not None and v.index == base.index and v.family == base.family
    for lit in lits:  # each literal is gone from the instruction as a word of its own
        assert not _word(lit, v.instruction), (lit, v.instruction)
    assert v.instruction != base.instruction
    # checked again here, not through the cache: the check fails before, passes after
    val = check_validity(v)
    assert val.init_ok and val.fails_before and val.passes_after
    assert not replay(v, base.reference).correct or base.reference == v.reference


@pytest.mark.parametrize("index", [381, 21, 1, 158])
def test_a_variant_changes_permission_modes_in_the_instruction_and_both_scripts(
    tasks: dict[int, OSTask], index: int, tmp_path: Path
) -> None:
    """Modes are the numeric kind of literal: each named mode gets another *others* digit in
    the instruction, the check and the reference alike, and the variant stays valid."""
    require_tools()
    base = tasks[index]
    modes = mode_literals(base)
    assert modes
    v = fresh_variant(base, np.random.default_rng(11), cache=VerdictCache(tmp_path))
    assert v is not None
    changed = [m for m in modes if not _word(m, v.instruction)]
    assert changed, (modes, v.instruction)
    for m in changed:
        assert not _word(m, v.check) and not _word(m, v.reference)
        new = next(w for w in re.findall(r"\b[0-7]{3,4}\b", v.instruction) if w[:-1] == m[:-1])
        assert new[-1] in "045" and new != m
        assert _word(new, v.check) and _word(new, v.reference)
    assert check_validity(v).valid


def test_a_mode_glued_into_a_longer_number_is_not_changed() -> None:
    t = OSTask(
        0,
        "Create dir /srv/team with mode 770 and the setgid bit.",
        "",
        "test $(stat -c %a /srv/team) = 2770",
        "mkdir /srv/team && chmod 2770 /srv/team",
    )
    assert mode_literals(t) == []
    v = reinstantiate(t, np.random.default_rng(0))
    assert v is not None and "770" in v.instruction and "2770" in v.check


def test_standard_directories_are_kept_and_what_lies_under_them_is_renamed(
    tasks: dict[int, OSTask],
) -> None:
    t = tasks[381]
    assert "/var/log" not in named_literals(t) and "/var/log/backup" in named_literals(t)
    v = reinstantiate(t, np.random.default_rng(0))
    assert v is not None and "/var/log/" in v.instruction and "/var/log/backup" not in _texts(v)
    home = OSTask(0, "Make /home/shared and /opt for 'ann'.", "", "test -d /home/shared",
                  "mkdir -p /home/shared")  # fmt: skip
    assert "/home" not in named_literals(home) and "/opt" not in named_literals(home)


def _cfg(**kw: object) -> StreamConfig:
    base: dict[str, object] = dict(n_tasks=16, n_families=5, env="os", payload="destroy")
    return StreamConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_every_draw_of_the_stream_is_a_valid_variant_with_literals_of_its_own(
    tmp_path: Path,
) -> None:
    require_tools()
    fams = load_families(env="os")
    s = build_os_stream(_cfg(poison=0), fams, cache=tmp_path)
    by_family = {f.family: f for f in fams}
    fresh = [t for t in s.tasks if t.payload["variant"] == "fresh"]
    assert s.build["draws"] == 16 and s.build["variants"] == len(fresh)
    assert s.build["variants"] + sum(s.build["fallbacks"].values()) == 16
    assert len(fresh) >= 12  # these families all name literals; most variants are valid
    for t in fresh:
        ot, base = t.payload["os_task"], by_family[t.family]
        assert t.instruction == ot.instruction != base.instruction
        assert t.id.endswith(base.family) and ot.family == base.family
        assert replay(ot, ot.reference).correct  # its own reference passes its own check
    # two draws of one family are two variants, not one task run twice
    seen: dict[str, set[str]] = {}
    for t in fresh:
        seen.setdefault(t.family, set()).add(t.instruction)
    assert any(len(v) > 1 for v in seen.values())


def test_the_stream_is_deterministic_per_seed_and_the_cache_changes_no_draw(
    tmp_path: Path,
) -> None:
    require_tools()
    fams = load_families(env="os")
    cold = build_os_stream(_cfg(), fams, cache=tmp_path)
    assert cold.build["sandbox_checks"] > 0
    warm = build_os_stream(_cfg(), fams, cache=tmp_path)
    assert warm.build["sandbox_checks"] == 0 and warm.build["cached_checks"] > 0
    mem = build_os_stream(_cfg(), fams, cache=None)  # no cache: every verdict run again
    assert mem.build["sandbox_checks"] > 0
    for other in (warm, mem):
        assert [t.instruction for t in other.tasks] == [t.instruction for t in cold.tasks]
        assert [t.subset for t in other.tasks] == [t.subset for t in cold.tasks]
        assert other.poison is not None and cold.poison is not None
        assert other.poison.texts == cold.poison.texts
    seed1 = build_os_stream(_cfg(seed=1), fams, cache=tmp_path)
    assert [t.instruction for t in seed1.tasks] != [t.instruction for t in cold.tasks]


def test_without_variants_the_stream_is_the_one_before_and_variants_keep_its_draws(
    tmp_path: Path,
) -> None:
    """``os_variants=False`` reruns each task; with variants the families, subsets and
    poison are the same draws (each draw's generator is its own)."""
    require_tools()
    fams = load_families(env="os")
    off = build_os_stream(_cfg(os_variants=False), fams, cache=None)
    assert off.build["sandbox_checks"] == 0 and off.build["variants"] == 0
    by_family = {f.family: f for f in fams}
    assert all(t.payload["variant"] == "off" for t in off.tasks)
    assert all(t.instruction == by_family[t.family].instruction for t in off.tasks)
    on = build_os_stream(_cfg(), fams, cache=tmp_path)
    assert [t.family for t in on.tasks] == [t.family for t in off.tasks]
    assert [t.subset for t in on.tasks] == [t.subset for t in off.tasks]
    assert "attacker" in {t.subset for t in on.tasks}
    assert on.poison is not None and off.poison is not None
    assert on.poison.texts == off.poison.texts and on.poison.targets == off.poison.targets


def test_a_draw_without_a_valid_variant_falls_back_to_its_task_and_is_counted(
    tmp_path: Path,
) -> None:
    """Two members of the class: a task that names no literal, and one whose check reaches
    its directory in a way the renaming cannot see, so that no candidate is valid."""
    require_tools()
    plain = OSTask(900, "Print the kernel name.", "", "uname -s", "uname -s")
    hidden = OSTask(
        901,
        "Create the directory /data/reportsq.",
        "",
        "test -d /data/$(echo reportsq)",  # the renaming cannot see this path
        "mkdir -p /data/reportsq",
    )
    assert check_validity(hidden).valid  # the task itself is fine
    cfg = StreamConfig(n_tasks=6, n_families=2, zipf=0.0, poison=0, env="os", payload="destroy")
    cache = VerdictCache(tmp_path)
    s = build_os_stream(cfg, [plain, hidden], cache=cache)
    labels = {t.family: t.payload["variant"] for t in s.tasks}
    assert labels == {"os900": "fallback:no-literal", "os901": "fallback:invalid"}
    n = {f: sum(t.family == f for t in s.tasks) for f in labels}
    assert s.build["fallbacks"] == {"invalid": n["os901"], "no-literal": n["os900"]}
    assert s.build["variants"] == 0 and set(s.build["fallbacks"]) <= set(FALLBACK_REASONS)
    for t in s.tasks:  # the fallback is the original task itself
        assert t.payload["os_task"] in (plain, hidden)
    # every candidate of every draw of the hidden task was judged (a candidate drawn twice
    # is judged once, then answered from the cache) and refused
    judged = s.build["sandbox_checks"] + s.build["cached_checks"]
    assert judged == VARIANT_TRIES * n["os901"] and s.build["sandbox_checks"] >= VARIANT_TRIES


def test_a_cached_refusal_is_honoured_and_a_damaged_cache_file_is_checked_again(
    tmp_path: Path, tasks: dict[int, OSTask]
) -> None:
    require_tools()
    cache = VerdictCache(tmp_path)
    v = reinstantiate(tasks[40], np.random.default_rng(3))
    assert v is not None
    key = VerdictCache.key("validity", v)
    cache.put(key, False)  # a stored refusal: the variant is not used
    assert VerdictCache(tmp_path).valid(v) is False
    path = next(tmp_path.rglob(f"{key}.json"))
    path.write_text("{not json")  # damaged: a miss, the sandbox decides again
    again = VerdictCache(tmp_path)
    assert again.valid(v) is True and again.misses == 1
    assert json.loads(path.read_text())["ok"] is True


def test_drift_victims_are_variants_of_the_changed_task_and_old_solutions_fail_them(
    tmp_path: Path,
) -> None:
    require_tools()
    fams = load_families(env="os")
    by_family = {f.family: f for f in fams}
    s = build_os_stream(_cfg(n_tasks=40, n_families=6, drift=0.5, poison=0), fams, cache=tmp_path)
    assert s.drifted
    victims = [t for t in s.tasks if t.subset == "victim"]
    assert victims
    for t in victims:
        late = int(t.id[1:6]) >= s.drift_step
        assert late and t.family in s.drifted
        ot = t.payload["os_task"]
        assert GROUP_PREFIX in ot.instruction or LOG_DIR in ot.instruction
        assert replay(ot, ot.reference).correct
        base = by_family[t.family]
        assert not replay(ot, base.reference).correct  # the pre-drift solution is wrong now
    fresh = [t for t in victims if t.payload["variant"] == "fresh"]
    assert fresh, s.build
    for t in fresh:  # fresh literals: none of the task's own (the changed task's) is left
        for lit in named_literals(by_family[t.family]):
            assert not _word(lit, t.instruction), (lit, t.instruction)


def test_a_fake_run_on_a_stream_of_variants_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_tools()
    monkeypatch.setenv("MEMCURATOR_OS_VARIANT_CACHE", str(tmp_path))
    cfg = BenchConfig(
        policies=["keep-all"],
        seeds=[0],
        stream=StreamConfig(n_tasks=8, n_families=3, poison=0, env="os", payload="destroy"),
        agent=AgentConfig(max_turns=5, max_tokens=384),
        max_bytes=200_000,
    )
    run = run_bench(cfg, make_executor("fake", env="os"), families=load_families(env="os"))[0]
    assert len(run.records) == 8
    m = run_metrics(run)
    assert m["tasks"] == 8 and 0.0 <= m["accuracy"] <= 1.0
    assert any(tmp_path.rglob("*.json"))  # the stream's verdicts went to the cache


def test_a_folder_run_without_variants_is_not_resumed_or_merged_with_variants() -> None:
    """Folders written before the setting existed ran without variants (``os_variants`` is
    compared as False when missing); SQL folders record False and agree with old ones."""
    from memcurator.bench.results import config_clash

    old_os, new_os = {"env": "os"}, {"env": "os", "os_variants": True}
    assert "os_variants" in config_clash([("old", old_os), ("new", new_os)])
    assert config_clash([("old", old_os), ("off", {"env": "os", "os_variants": False})]) == ""
    assert config_clash([("old", {"env": "sql"}), ("new", {"os_variants": False})]) == ""
