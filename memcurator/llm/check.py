"""Is the local LLM runtime alive on this CPU? One real completion with the bundled model.

Run it after an install and in CI (``.ci/run`` calls it before the tests)::

    python -m memcurator.llm.check [--require-portable] [--model PATH] [--threads N]

It loads the GGUF model (default: the bundled Gemma-3-270M), completes one prompt greedily,
and prints the llama-cpp-python version, the CPU backend library in use, the instruction-set
features that backend was compiled with, the completion, and tokens per second. Exit status 0
when a non-empty completion came back, 1 otherwise. The completion runs in a child process, so
a runtime that dies on an illegal instruction (SIGILL: built for another CPU) is reported as
such instead of killing the check.

``--require-portable`` also fails (exit 1) when the CPU backend was compiled with instructions
beyond AVX2 (AVX-512, AVX-VNNI, AMX): such a build, e.g. pip's default ``-march=native`` one,
runs on its build host and dies on CPUs without those instructions (see docs/install.md).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from memcurator.errors import LLMError

#: Feature names (as llama.cpp prints them) that not every x86-64 CPU with AVX2 has.
BEYOND_AVX2 = ("AVX512", "AVX_VNNI", "AMX")

PROMPT = (
    "Table: users(id, name, email)\n"
    "Question: get the email of user 17.\n"
    "SQL: SELECT email FROM users WHERE id = 17;\n"
    "Table: orders(id, user_id, total)\n"
    "Question: get the total of order 5.\n"
    "SQL:"
)


@dataclass(frozen=True)
class RuntimeInfo:
    """What llama.cpp runs with in this process.

    Read by :func:`runtime_info` once a model is loaded.

    Parameters
    ----------
    version : str
        llama-cpp-python's version.
    lib_dir : str
        Folder of its shared libraries.
    cpu_backend : str
        File name of the CPU backend library mapped into this process (``"?"`` if unknown, e.g.
        not on Linux).
    features : tuple of str
        Features the CPU backend reports as on, e.g. ``("SSE3", "AVX", "AVX2", "FMA")``.
    """

    version: str
    lib_dir: str
    cpu_backend: str
    features: tuple[str, ...]

    @property
    def beyond_avx2(self) -> tuple[str, ...]:
        """Features of the CPU backend that some AVX2 CPUs lack (AVX-512, AVX-VNNI, AMX)."""
        return tuple(f for f in self.features if f.startswith(BEYOND_AVX2))

    @property
    def portable(self) -> bool:
        """Whether the CPU backend needs no more than AVX2 (runs on any x86-64 CPU with AVX2).

        Examples
        --------
        >>> RuntimeInfo("0.3.36", "lib", "libggml-cpu.so", ("AVX2", "AMX_INT8")).portable
        False
        """
        return not self.beyond_avx2


def parse_features(system_info: str) -> tuple[str, ...]:
    """Names set to 1 in the ``CPU :`` part of ``llama_print_system_info()``.

    Examples
    --------
    >>> parse_features("CPU : SSE3 = 1 | AVX = 1 | AVX512 = 0 | LLAMAFILE = 1 | ")
    ('SSE3', 'AVX', 'LLAMAFILE')
    >>> parse_features("no CPU part")
    ()
    """
    _, sep, rest = system_info.partition("CPU :")
    if not sep:
        return ()
    names = []
    for item in rest.split("|"):
        name, eq, value = item.partition("=")
        if not eq:
            if ":" in item:  # the next backend's section begins
                break
            continue
        if value.strip() == "1":
            names.append(name.strip())
    return tuple(names)


def _mapped_cpu_backend() -> str:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "?"
    names = {Path(line.split()[-1]).name for line in maps.splitlines() if "libggml-cpu" in line}
    return ", ".join(sorted(names)) or "?"


def runtime_info() -> RuntimeInfo:
    """Describe the llama.cpp runtime of this process (call after a model is loaded).

    Raises
    ------
    LLMError
        llama-cpp-python is not installed or its libraries cannot be opened.
    """
    try:
        import llama_cpp
    except ImportError as e:
        raise LLMError("llama-cpp-python is not installed (python scripts/install.py)") from e
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    return RuntimeInfo(
        version=str(getattr(llama_cpp, "__version__", "?")),
        lib_dir=str(lib_dir),
        cpu_backend=_mapped_cpu_backend(),
        features=parse_features(info),
    )


def run_check(
    model_path: str | None = None, n_threads: int | None = None, require_portable: bool = False
) -> int:
    """Complete :data:`PROMPT` once in this process and print what ran; the exit status.

    Returns
    -------
    int
        0 when a non-empty completion came back (and the runtime is portable, if required),
        else 1.
    """
    from memcurator.llm.gguf import LlamaCppExecutor

    try:
        ex = LlamaCppExecutor(model_path=model_path, n_threads=n_threads)
        ex.load()  # before reading which backend is in use
        info = runtime_info()
        print(f"llama-cpp-python {info.version} ({info.lib_dir})")
        print(f"CPU backend: {info.cpu_backend}")
        print("CPU features used: " + (" ".join(info.features) or "?"))
        out = ex.complete(PROMPT, max_tokens=24, stop=["\n"])
    except LLMError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    rate = out.tokens_out / out.latency_s if out.latency_s > 0 else float("nan")
    print(f"model {out.model}: {out.tokens_in} prompt tokens, {out.tokens_out} generated")
    print(f"completion: {out.text.strip()!r}")
    secs = f"{out.latency_s:.2f} s"
    print(f"{rate:.1f} tokens/s ({out.tokens_out} tokens in {secs}, prompt included)")
    if not out.text.strip():
        print("FAILED: the model returned an empty completion", file=sys.stderr)
        return 1
    if require_portable and not info.portable:
        print(
            "FAILED: this runtime was compiled for this CPU ("
            + ", ".join(info.beyond_avx2)
            + ") and dies on CPUs without those instructions; reinstall it with "
            "python scripts/install.py",
            file=sys.stderr,
        )
        return 1
    print("ok")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: run :func:`run_check` in a child process and report how it ended."""
    parser = argparse.ArgumentParser(
        prog="python -m memcurator.llm.check",
        description="One real completion with the local model; exit 1 if the runtime is dead.",
    )
    parser.add_argument("--model", help="GGUF file (default: the bundled Gemma-3-270M)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: CPUs - 1)")
    parser.add_argument(
        "--require-portable",
        action="store_true",
        help="fail if the runtime needs instructions beyond AVX2 (AVX-512, AMX)",
    )
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_process:
        return run_check(args.model, args.threads, args.require_portable)
    child = [sys.executable, "-m", "memcurator.llm.check", "--in-process"]
    child += list(sys.argv[1:] if argv is None else argv)
    rc = subprocess.call(child)
    if rc < 0:
        name = signal.Signals(-rc).name
        hint = " (illegal instruction: built for another CPU)" if name == "SIGILL" else ""
        print(
            f"FAILED: the LLM runtime died with {name}{hint}; "
            "reinstall it with python scripts/install.py",
            file=sys.stderr,
        )
        return 1
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
