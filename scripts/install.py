#!/usr/bin/env python3
"""Install memcurator with a portable llama.cpp runtime (any x86-64 CPU with AVX2).

Usage (inside the virtualenv, from the checkout)::

    python scripts/install.py            # pip install -e packages/memcurator-bench -e . -e '.[dev]'
    python scripts/install.py bench      # the same with '.[bench]': core and benchmark only
    python scripts/install.py ""         # pip install -e . (the core alone: no benchmark)
    python scripts/install.py --wheel-only
    python scripts/install.py --quiet dev  # pip -q (CI)

Why a script: ``pip install llama-cpp-python`` builds llama.cpp from its sdist with
``GGML_NATIVE=ON`` (``-march=native``), so a wheel built on a CPU with AVX-512/AMX dies with
SIGILL on a CPU without them, and pip's wheel cache, whose key is the sdist's URL and not the
build settings (pypa/pip#11164), hands that wheel to every later install on the machine. This
script therefore

1. builds llama-cpp-python once from its sdist with the CMake settings below, never reading or
   writing pip's cache (``--no-cache-dir``; ``CMAKE_ARGS`` and friends from the caller's
   environment are dropped), into a wheelhouse whose folder name is a hash of the version and the
   settings (``~/.cache/memcurator/wheels/<hash>/``, reused by every later install on the machine);
2. installs the project with ``--only-binary llama-cpp-python --find-links <wheelhouse>`` and a
   constraint pinning the version, so pip can take llama-cpp-python from that wheelhouse only:
   neither an sdist build nor a wheel from pip's cache can come in.

3. with the ``dev`` extras, makes sure ``bwrap`` (Debian's ``bubblewrap``) is there: the OS
   environment's sandbox and its tests need it (and root). As root with ``apt-get`` it is
   installed; otherwise the script says how, loudly (the tests then fail, never skip).

The benchmark and its environments are their own distribution, ``memcurator-bench``
(``packages/memcurator-bench/``, issue 31), which the core's ``bench``, ``ray`` and ``dev`` extras
pull by name; with any of them the script hands pip that project from this checkout (editable,
like the core), so pip takes it from here and never looks for it on an index.

Exit status: pip's status when a pip step fails, 2 on bad arguments, 0 on success.
See docs/install.md for the choice of settings and how portability was checked.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "requirements" / "llama-runtime.txt"
#: the benchmark's distribution (memcurator-bench), built from the same checkout
BENCH_PROJECT = ROOT / "packages" / "memcurator-bench"
#: the core's extras that pull memcurator-bench (pyproject.toml)
BENCH_EXTRAS = frozenset({"bench", "ray", "dev"})

#: llama-cpp-python release built here; keep in step with requirements/llama-runtime.txt.
LLAMA_CPP_PYTHON = "0.3.36"

#: CMake definitions of the portable build (see docs/install.md for the choice). GGML_NATIVE=OFF
#: drops -march=native; the CPU backend is then compiled for AVX2 with FMA, F16C (and BMI2),
#: which every x86-64 CPU since Intel Haswell (2013) and AMD Excavator has.
CMAKE_DEFINES: dict[str, str] = {
    "GGML_NATIVE": "OFF",
    "GGML_AVX": "ON",
    "GGML_AVX2": "ON",
    "GGML_FMA": "ON",
    "GGML_F16C": "ON",
}

#: Environment variables through which a caller's shell could change the build.
_BUILD_ENV_DROP = ("CMAKE_ARGS", "FORCE_CMAKE", "SKBUILD_CMAKE_ARGS", "SKBUILD_CMAKE_DEFINE")


def wheelhouse() -> Path:
    """Folder of the portable wheel: ``$MEMCURATOR_WHEELHOUSE`` or a settings-keyed cache folder."""
    env = os.environ.get("MEMCURATOR_WHEELHOUSE")
    if env:
        return Path(env)
    key = repr((LLAMA_CPP_PYTHON, sorted(CMAKE_DEFINES.items())))
    tag = hashlib.sha256(key.encode()).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "memcurator" / "wheels" / f"llama-cpp-python-{LLAMA_CPP_PYTHON}-{tag}"


def _wheel(folder: Path) -> Path | None:
    found = sorted(folder.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}-*.whl"))
    return found[0] if found else None


QUIET: list[str] = []  # ["-q"] with --quiet


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args, *QUIET]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, env=env)
    if rc != 0:
        raise SystemExit(rc)


def build_wheel(folder: Path) -> Path:
    """Build the portable llama-cpp-python wheel into ``folder`` unless it is there already."""
    have = _wheel(folder)
    if have is not None:
        print(f"portable llama-cpp-python wheel: {have} (reused)", flush=True)
        return have
    folder.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in _BUILD_ENV_DROP}
    settings = [f"--config-settings=cmake.define.{k}={v}" for k, v in CMAKE_DEFINES.items()]
    print(
        f"building llama-cpp-python {LLAMA_CPP_PYTHON} for any x86-64 CPU "
        "(once per machine; about 4-10 minutes on 2 cores) ...",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix=".build-", dir=folder.parent) as tmp:
        _pip(
            "wheel",
            "--no-cache-dir",
            "--no-deps",
            "--no-binary=llama-cpp-python",
            *settings,
            "--wheel-dir",
            tmp,
            f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
            env=env,
        )
        built = _wheel(Path(tmp))
        if built is None:
            raise SystemExit(f"pip wheel made no llama-cpp-python wheel in {tmp}")
        folder.mkdir(exist_ok=True)
        target = folder / built.name
        os.replace(built, target)  # same file system: the wheel appears whole or not at all
    print(f"portable llama-cpp-python wheel: {target}", flush=True)
    return target


def ensure_bwrap(run=subprocess.run, which=None) -> str:
    """Install bubblewrap with apt-get when missing and root; return what happened.

    Returns
    -------
    str
        ``"present"``, ``"installed"`` or ``"missing"`` (not root or no apt-get: a message on
        stderr says how to install it).
    """
    import shutil

    which = which or shutil.which
    if which("bwrap"):
        return "present"
    if os.geteuid() == 0 and which("apt-get"):
        run(["apt-get", "update", "-q"], check=True)
        run(["apt-get", "install", "-y", "-q", "bubblewrap"], check=True)
        return "installed"
    print(
        "WARNING: bwrap is missing. The OS environment (memcurator bench --env os) and its "
        "tests need it and root: apt-get install -y bubblewrap",
        file=sys.stderr,
    )
    return "missing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("extras", nargs="?", default="dev", help="extras to install, e.g. dev")
    parser.add_argument(
        "--wheel-only", action="store_true", help="only build (or find) the runtime wheel"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="pass -q to pip")
    args = parser.parse_args(argv)
    if args.quiet:
        QUIET.append("-q")
    folder = wheelhouse()
    build_wheel(folder)
    if args.wheel_only:
        return 0
    extras = {e.strip() for e in args.extras.split(",") if e.strip()}
    target = f"{ROOT}[{args.extras}]" if args.extras else str(ROOT)
    # the core is named once without extras too: pip 23.2 (Python 3.11's own) otherwise does not
    # take it for memcurator-bench's requirement `memcurator==0.1.0` and searches the index for it
    # (pypa/pip#8785); pip 26.3 needs no help
    bench = ["-e", str(BENCH_PROJECT), "-e", str(ROOT)] if extras & BENCH_EXTRAS else []
    # With the benchmark, both editable installs put their folder on sys.path ('compat' mode)
    # instead of setuptools' import hooks: memcurator-bench's hook declares `memcurator` a
    # namespace package, which Python's path finder then returns before the core's hook is
    # asked, so `from memcurator import Memory` failed outside the checkout's root. With the
    # checkout's root on sys.path the core's memcurator/__init__.py is a regular package and
    # wins (tests/test_core_only.py::test_memory_imports_from_any_folder).
    compat = ["--config-settings", "editable_mode=compat"] if bench else []
    _pip(
        "install",
        "--only-binary=llama-cpp-python",
        "--find-links",
        str(folder),
        "--constraint",
        str(CONSTRAINTS),
        *compat,
        *bench,
        "-e",
        target,
    )
    if "dev" in extras:
        ensure_bwrap()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
