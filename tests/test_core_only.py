"""A core-only install: the two distributions built from this repository, and the core alone.

The core (``pyproject.toml`` at the root) and the benchmark (``packages/memcurator-bench``) are
built into wheels the way a release would build them; the core's wheel holds no benchmark or
environment file, the benchmark's holds exactly those (and never the core's
``memcurator/__init__.py``), and the two together hold every module of the checkout. The core's
wheel is then installed alone into a fresh virtualenv (no system site-packages, so the dev install
is out of sight), where the README's library example runs with every preset, the README
quickstart's loop of ``tests/test_import_layers.py`` runs on a real core-only install instead of
an import hook, ``memcurator.bench`` and ``memcurator.envs`` are never loaded, and
``memcurator bench`` says which distribution to install (issue 31).

Building needs setuptools>=77 in pip's isolated build environment and installing needs the core's
dependencies: pip takes them from its cache or the package index, pinned to the versions of this
interpreter's environment so that nothing newer is fetched. About a minute on two cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections import Counter
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from test_import_layers import QUICKSTART_CORE_ONLY

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BENCH_PROJECT = ROOT / "packages" / "memcurator-bench"
OUTER = ("memcurator/bench/", "memcurator/envs/")


def _clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH/PYTHONHOME: a checkout on the path (and the egg-info
    an editable install leaves in it) would make the fresh virtualenv see the dev install."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _pip(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", *args],
        check=True,
        cwd=cwd,
        env=_clean_env(),
    )


def _copy_checkout(dest: Path) -> None:
    """What the two builds read, copied (the checkout gets no build/ or egg-info folders): the
    root project, the package, and the benchmark project with its links into the package."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    shutil.copytree(ROOT / "memcurator", dest / "memcurator", ignore=ignore)
    (dest / "packages").mkdir()
    bench = dest / "packages" / BENCH_PROJECT.name
    shutil.copytree(BENCH_PROJECT, bench, symlinks=True, ignore=ignore)


@pytest.fixture(scope="module")
def work() -> Iterator[Path]:
    """A folder of this module's own (not pytest's shared base, which another pytest session on
    the machine may rotate away while the virtualenv is in use)."""
    with tempfile.TemporaryDirectory(prefix="memcurator-core-only-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="module")
def wheels(work: Path) -> dict[str, Path]:
    """The core's and the benchmark's wheels, built from a copy of the checkout."""
    tmp = work / "dists"
    tmp.mkdir()
    src = tmp / "src"
    _copy_checkout(src)
    dist = tmp / "dist"
    _pip("wheel", "--no-deps", "--wheel-dir", str(dist), str(src), cwd=tmp)
    bench = src / "packages" / BENCH_PROJECT.name
    _pip("wheel", "--no-deps", "--wheel-dir", str(dist), str(bench), cwd=tmp)
    found = {w.name.split("-")[0]: w for w in dist.glob("*.whl")}
    assert set(found) == {"memcurator", "memcurator_bench"}, found
    return {"core": found["memcurator"], "bench": found["memcurator_bench"]}


def _files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return [n for n in z.namelist() if ".dist-info/" not in n]


def test_the_core_wheel_holds_no_benchmark_or_environment_file(wheels: dict[str, Path]) -> None:
    files = _files(wheels["core"])
    assert [f for f in files if f.startswith(OUTER)] == []
    tops = Counter(f.split("/")[1] for f in files if f.count("/") >= 2)
    # the core's own parts are all there, the domain checks among them (plug-ins on the core)
    for part in ("domains", "trust", "lifecycle", "policy", "store", "service"):
        assert tops[part] > 0, part
    assert "memcurator/__init__.py" in files and "memcurator/cli.py" in files
    with zipfile.ZipFile(wheels["core"]) as z:
        eps = next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = z.read(eps).decode()
    assert "[memcurator.domain_checks]" in text and "memcurator.domains.sql.check:SQLCheck" in text
    assert "memcurator.envs" not in text and "memcurator.bench" not in text


def test_the_bench_wheel_holds_exactly_the_benchmark_and_environments(
    wheels: dict[str, Path],
) -> None:
    files = _files(wheels["bench"])
    assert files and all(f.startswith(OUTER) for f in files), files
    assert "memcurator/__init__.py" not in files  # the core's, never overwritten
    # together the two wheels hold every module of the checkout, each in one of them only
    core = set(_files(wheels["core"]))
    assert core.isdisjoint(files)
    checkout = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "memcurator").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert checkout <= core | set(files), sorted(checkout - core - set(files))
    with zipfile.ZipFile(wheels["bench"]) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = re.findall(r"^Requires-Dist: (.+)$", meta, flags=re.M)
    assert "memcurator==0.1.0" in requires
    assert any(r.startswith("llama-cpp-python") for r in requires)
    assert any(r.startswith("matplotlib") for r in requires)


def _pins(tmp: Path) -> Path:
    """This environment's versions as pip constraints (the memcurator distributions left out)."""
    lines = sorted(
        {
            f"{d.metadata['Name']}=={d.version}"
            for d in metadata.distributions()
            if d.metadata["Name"] and not d.metadata["Name"].lower().startswith("memcurator")
        }
    )
    path = tmp / "pins.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def core_venv(wheels: dict[str, Path], work: Path) -> Path:
    """A fresh virtualenv with the core's wheel and its dependencies only; its python.

    No system site-packages (the dev install stays out of sight) and no pip of its own: this
    interpreter's pip installs into it (``--python``), without compiling byte code."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pins = _pins(work)
    _pip(
        "--python",
        str(python),
        "install",
        "--no-compile",
        "--constraint",
        str(pins),
        str(wheels["core"]),
        cwd=work,
    )
    probe = _run(python, "import memcurator, numpy, sqlglot; print(memcurator.__file__)", work)
    assert probe.returncode == 0 and str(venv) in probe.stdout, probe.stderr[-2000:]
    return python


def _run(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(),
        timeout=600,
    )


def _readme_library_example() -> str:
    """The first Python block of README.md's "The library" section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## The library") :]
    m = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert m is not None
    return m.group(1)


LOADED = """
import json, sys
import memcurator
print(json.dumps({"file": memcurator.__file__, "outer": sorted(
    m for m in sys.modules if m.startswith(("memcurator.bench", "memcurator.envs")))}))
"""


def test_the_readme_library_example_runs_with_every_preset(core_venv: Path, tmp_path: Path) -> None:
    example = _readme_library_example()
    assert 'policy="curator"' in example and '"agent.sqlite"' in example
    assert "mem.forget(hit.ids[0])" in example
    body = (
        example.replace('policy="curator"', "policy=PRESET")
        .replace('"agent.sqlite"', 'f"agent-{i}.sqlite"')
        # a preset that admits nothing at first (edm's gate, no-memory) recalls nothing to forget
        .replace("mem.forget(hit.ids[0])", "mem.forget(hit.ids[0]) if hit.ids else None")
    )
    code = (
        "from memcurator.policy import POLICIES\n"
        "refused = {}\n"
        "for i, PRESET in enumerate(sorted(POLICIES)):\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "    refused[PRESET] = not r.admitted\n"
        "print(json.dumps(refused))\n"
    )
    out = _run(core_venv, "import json\n" + code + LOADED, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    refused_line, loaded_line = out.stdout.strip().splitlines()[-2:]
    refused, loaded = json.loads(refused_line), json.loads(loaded_line)
    assert len(refused) >= 40  # every preset ran the example
    assert refused["curator"] is True  # the README's claim: the trust gate refuses the DROP
    assert loaded["outer"] == []
    assert Path(loaded["file"]).is_relative_to(core_venv.parent.parent)  # the wheel's, not ROOT


def test_the_quickstart_loop_on_a_core_only_install(core_venv: Path, tmp_path: Path) -> None:
    # the same loop tests/test_import_layers.py runs behind an import hook, here with the
    # benchmark's packages really absent (its hook finds nothing to refuse)
    out = _run(core_venv, QUICKSTART_CORE_ONLY + LOADED, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["outer"] == []


def test_the_benchmark_is_absent_and_the_cli_says_what_to_install(
    core_venv: Path, tmp_path: Path
) -> None:
    probe = _run(core_venv, "import memcurator.envs", tmp_path)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr
    cli = core_venv.parent / "memcurator"
    env = _clean_env()
    helped = subprocess.run([str(cli), "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "bench" in helped.stdout
    for command in (["bench", "--executor", "fake"], ["report", "x"], ["compare", "x"]):
        res = subprocess.run(
            [str(cli), *command], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        said = " ".join((res.stdout + res.stderr).split())
        assert res.returncode == 2, said
        assert f"memcurator {command[0]} needs the benchmark" in said
        assert "install memcurator-bench" in said
        assert "Traceback" not in said


@pytest.mark.parametrize(
    ("extras", "with_bench"),
    [("dev", True), ("bench", True), ("ray", True), ("serve,postgres", False), ("", False)],
)
def test_the_installer_hands_pip_the_local_benchmark_with_the_extras_that_pull_it(
    extras: str, with_bench: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_install import _script

    monkeypatch.setenv("MEMCURATOR_WHEELHOUSE", str(tmp_path))
    (tmp_path / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")
    seen: list[list[str]] = []
    monkeypatch.setattr("subprocess.call", lambda cmd, env=None: seen.append(cmd) or 0)
    mod = _script()
    monkeypatch.setattr(mod, "ensure_bwrap", lambda: "present")
    assert mod.main([extras]) == 0
    (install,) = seen
    target = f"{ROOT}[{extras}]" if extras else str(ROOT)
    assert install[-2:] == ["-e", target]
    bench = ["-e", str(BENCH_PROJECT), "-e", str(ROOT)]
    found = install[install.index("-e") : -2] if install.index("-e") < len(install) - 2 else []
    assert found == (bench if with_bench else [])
    compat = ["--config-settings", "editable_mode=compat"]
    has_compat = any(install[i : i + 2] == compat for i in range(len(install) - 1))
    assert has_compat == with_bench
    # the extras that name memcurator-bench in pyproject.toml are the ones the script knows
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pulling = {k for k, v in meta.items() if any("memcurator-bench" in r for r in v)}
    assert pulling == {"bench", "ray"} and mod.BENCH_EXTRAS == pulling | {"dev"}


def test_memory_imports_from_any_folder(tmp_path: Path) -> None:
    """The installed memcurator (whatever installed it: .ci/run and README command 1 use
    scripts/install.py) is the core's regular package from any working directory, not an empty
    namespace left by memcurator-bench's editable install (found by a new user from a fresh
    clone: `from memcurator import Memory` failed outside the checkout's root)."""
    code = (
        "import memcurator, sys; from memcurator import Memory; "
        "assert memcurator.__file__ is not None, memcurator.__path__; "
        "print(memcurator.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith(os.path.join("memcurator", "__init__.py"))
