"""The portable-runtime install (scripts/install.py) and the runtime check's reporting.

The real build and completion run in CI (``.ci/run``: ``scripts/install.py``, then
``python -m memcurator.llm.check --require-portable``); these tests pin the commands the script
hands to pip and how the check reports failures, without building or loading anything.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from memcurator.llm import check

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_script", ROOT / "scripts/install.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict[str, str] | None]]:
    seen: list[tuple[list[str], dict[str, str] | None]] = []

    def fake_call(cmd: list[str], env: dict[str, str] | None = None) -> int:
        seen.append((cmd, env))
        if cmd[3] == "wheel":  # make the wheel pip would have built
            out = Path(cmd[cmd.index("--wheel-dir") + 1])
            (out / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")
        return 0

    monkeypatch.setattr("subprocess.call", fake_call)
    return seen


def test_pinned_version_matches_constraints() -> None:
    mod = _script()
    pins = [
        line.strip()
        for line in mod.CONSTRAINTS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert pins == [f"llama-cpp-python=={mod.LLAMA_CPP_PYTHON}"]
    assert mod.CMAKE_DEFINES["GGML_NATIVE"] == "OFF"
    assert not any(k.startswith(("GGML_AVX512", "GGML_AMX")) for k in mod.CMAKE_DEFINES)


def test_builds_without_pips_cache_then_installs_only_that_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list
) -> None:
    monkeypatch.setenv("MEMCURATOR_WHEELHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    mod = _script()
    monkeypatch.setattr(mod, "ensure_bwrap", lambda: "present")  # no system change in a test
    assert mod.main(["dev"]) == 0
    (build, build_env), (install, _) = calls
    assert build[3:5] == ["wheel", "--no-cache-dir"]
    assert "--no-binary=llama-cpp-python" in build
    assert "--config-settings=cmake.define.GGML_NATIVE=OFF" in build
    assert build_env is not None and "CMAKE_ARGS" not in build_env
    assert install[3] == "install"
    assert "--only-binary=llama-cpp-python" in install
    assert install[install.index("--find-links") + 1] == str(tmp_path / "wh")
    assert install[-1] == f"{mod.ROOT}[dev]"
    assert [p.name for p in (tmp_path / "wh").iterdir()] == [
        "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    ]


def test_reuses_a_built_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list) -> None:
    monkeypatch.setenv("MEMCURATOR_WHEELHOUSE", str(tmp_path))
    (tmp_path / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")
    mod = _script()
    assert mod.main(["--wheel-only"]) == 0
    assert calls == []


def test_wheelhouse_is_keyed_by_the_build_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMCURATOR_WHEELHOUSE", raising=False)
    mod = _script()
    first = mod.wheelhouse()
    mod.CMAKE_DEFINES["GGML_NATIVE"] = "ON"
    assert mod.wheelhouse() != first
    assert first.name.startswith(f"llama-cpp-python-{mod.LLAMA_CPP_PYTHON}-")


def test_check_reports_a_sigill(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr("subprocess.call", lambda cmd: -4)
    assert check.main([]) == 1
    assert "SIGILL (illegal instruction: built for another CPU)" in capsys.readouterr().err


def test_check_fails_on_a_missing_model(tmp_path: Path, capsys) -> None:
    pytest.importorskip("llama_cpp")
    rc = check.run_check(model_path=str(tmp_path / "none.gguf"))
    assert rc == 1
    assert "GGUF model file not found" in capsys.readouterr().err


def test_portability_verdict() -> None:
    avx2 = check.RuntimeInfo("v", "lib", "libggml-cpu.so", ("AVX", "AVX2", "FMA", "BMI2"))
    native = check.RuntimeInfo("v", "lib", "libggml-cpu.so", ("AVX2", "AVX512", "AMX_INT8"))
    assert avx2.portable and avx2.beyond_avx2 == ()
    assert not native.portable and native.beyond_avx2 == ("AVX512", "AMX_INT8")


def test_dev_install_brings_bubblewrap_or_says_how(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _script()
    ran: list[list[str]] = []
    have = {"apt-get": "/usr/bin/apt-get"}
    assert mod.ensure_bwrap(run=lambda a, check: ran.append(a), which=lambda n: "/b") == "present"
    assert ran == []
    monkeypatch.setattr(mod.os, "geteuid", lambda: 0)
    assert mod.ensure_bwrap(run=lambda a, check: ran.append(a), which=have.get) == "installed"
    assert ran[-1] == ["apt-get", "install", "-y", "-q", "bubblewrap"]
    monkeypatch.setattr(mod.os, "geteuid", lambda: 1000)
    assert mod.ensure_bwrap(run=lambda a, check: ran.append(a), which=have.get) == "missing"
    assert "apt-get install -y bubblewrap" in capsys.readouterr().err
