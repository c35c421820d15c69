"""A throwaway Linux root per task, on bubblewrap: the OS environment's sandbox.

One :class:`Sandbox` is one task's machine, as upstream's Docker container is (LifelongAgentBench,
``src/tasks/instance/os_interaction/``): commands run as root with cwd ``/`` and ``HOME=/root``,
each as its own ``bash -c SCRIPT`` with a timeout (20 s upstream), stdout and stderr together;
files and background processes persist between the commands of one task until it is closed.

How it is built (``../shared/data/lifelongagentbench-os/README.md`` measured the same design):

* **User namespace, shifted (safest, the default).** ``bwrap`` runs as the unprivileged host uid
  ``uid_base`` and creates a user namespace; the runner (host root) writes its uid/gid map
  ``0 uid_base 65536`` before the sandbox goes on (``--userns-block-fd``). Sandbox root is host
  uid ``uid_base``: it owns nothing on the host, and its capabilities hold only inside its own
  namespaces. ``mode="identity"`` maps ``0 0 65536`` instead (sandbox root is kernel uid 0, with
  the capabilities below confined to the namespaces; closer to Docker, less safe).
* **Capabilities:** Docker's default set minus ``MKNOD`` and ``NET_RAW`` (:data:`CAPABILITIES`),
  for the sandbox's first process and as the bounding set of every command.
* **Namespaces:** ``--unshare-all`` (user, mount, pid, network with loopback only, ipc, uts,
  cgroup), ``--die-with-parent``, ``--new-session``.
* **Filesystem:** the root is one tmpfs of ``tmpfs_mb`` inside the sandbox's mount namespace
  (one file system, so hard links and renames work between ``/etc``, ``/var``, ``/tmp``,
  ``/home``, ``/root``, ``/opt``, ``/srv`` and ``/``). Host ``/usr`` is bound read-only
  (``/bin``, ``/lib*``, ``/sbin`` are links into it); ``/usr/local`` is a second empty tmpfs
  of ``tmpfs_mb``. ``/etc`` is filled
  with a clean skeleton (:func:`clean_etc`): Debian's pristine ``passwd``/``group`` from
  ``base-passwd`` plus Ubuntu's user 1000, generated ``shadow``/``gshadow``, and the host's
  non-secret configuration (PAM, login.defs, skel, alternatives, the loader cache). No host
  path outside ``/usr`` is visible. ``/proc/sys`` is read-only.
* **Nothing on the host disk.** Every writable path lives in tmpfs mounts of the sandbox's own
  mount namespace: when its first process dies (``close``, or the runner's death via
  ``--die-with-parent``) the kernel frees them. There are no temporary directories or host
  mounts to clean up, even after ``kill -9`` of the runner.
* **Commands** enter the running sandbox like ``docker exec``: ``nsenter`` into its namespaces,
  root and cwd, ``setpriv`` to the bounding set, a clean environment, ``bash -c SCRIPT``. Output
  goes to an anonymous memory file (so background jobs never block the read) and is truncated
  to ``max_output`` characters; after ``timeout_s`` the command's process group is killed.

What it does not guarantee: resource limits beyond a process-count limit and the tmpfs sizes
(no CPU or memory cgroup: a command can use the host's CPU and memory for its 20 s); the host
kernel is shared (a kernel bug is an escape); a command that starts a new session escapes
the timeout's process-group kill (it dies when the sandbox closes).

Requires host root (to write the uid map and enter the namespaces), ``bwrap`` (Debian package
``bubblewrap``), and util-linux's ``nsenter`` and ``setpriv``. :func:`require_tools` fails
loudly when one is missing: nothing here skips silently.

Examples
--------
>>> from memcurator.envs.os.sandbox import Sandbox
>>> with Sandbox() as box:  # doctest: +SKIP
...     box.run("useradd alice && id -u alice").output
'1001\\n'
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from memcurator.errors import InvalidInput, MemcuratorError

#: Docker's default capability set less MKNOD and NET_RAW (moby ``oci/caps/defaults.go``).
CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
)

#: The environment of every command (upstream: ``docker exec`` in ``ubuntu``, root, cwd /).
ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "HOSTNAME": "sandbox",
}

#: Directories of the root (one tmpfs, so hard links and renames work across them) and modes.
ROOT_DIRS = {
    "/etc": 0o755,
    "/var": 0o755,
    "/tmp": 0o1777,
    "/home": 0o755,
    "/root": 0o700,
    "/opt": 0o755,
    "/srv": 0o755,
    "/mnt": 0o755,
    "/media": 0o755,
    "/run": 0o755,
}

#: Directories created inside those, as an image has them.
SUBDIRS = (
    "/var/log",
    "/var/tmp",
    "/var/lib",
    "/var/cache",
    "/var/mail",
    "/var/spool",
    "/var/backups",
    "/var/local",
    "/var/opt",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/local/lib",
    "/usr/local/share",
    "/usr/local/etc",
    "/usr/local/include",
    "/usr/local/src",
    "/run/lock",
)

#: Host ``/etc`` paths copied into the clean ``/etc`` (files, directories walked, symlinks kept).
#: Only configuration without secrets: no passwd/shadow/group of the host, no keys, no opasswd.
ETC_ALLOW = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "login.defs",
    "pam.conf",
    "pam.d",
    "security",
    "skel",
    "default/useradd",
    "adduser.conf",
    "deluser.conf",
    "shells",
    "nsswitch.conf",
    "alternatives",
    "localtime",
    "timezone",
    "os-release",
    "debian_version",
    "environment",
    "profile",
    "profile.d",
    "bash.bashrc",
    "inputrc",
    "vim",
    "magic",
    "magic.mime",
    "mime.types",
    "subuid",
    "subgid",
)
ETC_DENY = ("security/opasswd",)

#: Ubuntu's image adds user and group 1000 (``ubuntu``) to Debian's base accounts.
UBUNTU_USER = "ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash"

#: The output of a command run in (or ending) a sandbox whose processes were all killed.
ENDED = "(the sandbox has ended: its processes were killed)"

BASE_PASSWD = Path("/usr/share/base-passwd")


class SandboxUnavailable(MemcuratorError, RuntimeError):
    """The sandbox cannot be built on this host (no ``bwrap``, not root, no user namespaces).

    Never skipped over: the message names what is missing and how to install it.
    """


class SandboxError(MemcuratorError, RuntimeError):
    """A sandbox that started failed (its first process died, a command could not enter it)."""


@dataclass(frozen=True)
class CommandResult:
    """What one command did.

    Attributes
    ----------
    exit_code : int or None
        The exit status of ``bash -c``; None when it timed out or the sandbox was gone.
    output : str
        Stdout and stderr together (UTF-8, undecodable bytes replaced), truncated to
        ``max_output`` characters.
    timed_out : bool
    truncated : bool
        The output was longer than ``max_output`` characters.
    seconds : float
        Wall-clock seconds from start to exit or kill.
    """

    exit_code: int | None
    output: str
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Exit status 0 (a timeout is not ok, as upstream counts it)."""
        return self.exit_code == 0


@dataclass(frozen=True)
class SandboxConfig:
    """Settings of a :class:`Sandbox`.

    Parameters
    ----------
    timeout_s : float, default 20.0
        Seconds per command (upstream ``command_execution_timeout: 20``).
    max_output : int, default 4000
        Characters of a command's output kept (the rest is cut, :attr:`CommandResult.truncated`).
    mode : {"shifted", "identity"}, default "shifted"
        uid map ``0 uid_base 65536`` (sandbox root is an unprivileged host uid) or ``0 0 65536``.
    uid_base : int, default 1_200_000_000
        First host uid of the shifted map; far above any login uid or usual subuid range.
    tmpfs_mb : int, default 512
        Size of the root tmpfs and of ``/usr/local``'s, MiB (memory, used only as written).
    max_procs : int, default 4096
        ``RLIMIT_NPROC`` of the sandbox's processes (counted per host uid).
    """

    timeout_s: float = 20.0
    max_output: int = 4000
    mode: str = "shifted"
    uid_base: int = 1_200_000_000
    tmpfs_mb: int = 512
    max_procs: int = 4096

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise InvalidInput(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if self.max_output < 1:
            raise InvalidInput(f"max_output must be >= 1 character, got {self.max_output!r}")
        if self.mode not in ("shifted", "identity"):
            raise InvalidInput(f"mode must be 'shifted' or 'identity', got {self.mode!r}")
        if not 65536 <= self.uid_base <= 2**32 - 2 - 65536:
            raise InvalidInput(f"uid_base must leave room for 65536 uids, got {self.uid_base!r}")
        if self.tmpfs_mb < 1 or self.max_procs < 16:
            raise InvalidInput("tmpfs_mb must be >= 1 and max_procs >= 16")


def require_tools() -> dict[str, str]:
    """Paths of ``bwrap``, ``nsenter`` and ``setpriv``; raise when the sandbox cannot run.

    Returns
    -------
    dict of str to str

    Raises
    ------
    SandboxUnavailable
        A tool is missing, or the process is not root (the uid map and ``nsenter`` need it).
    """
    found = {t: shutil.which(t) for t in ("bwrap", "nsenter", "setpriv")}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        hint = {
            "bwrap": "apt-get install -y bubblewrap",
            "nsenter": "apt-get install -y util-linux",
            "setpriv": "apt-get install -y util-linux",
        }
        raise SandboxUnavailable(
            f"the OS sandbox needs {', '.join(missing)} on PATH; install with: "
            + "; ".join(sorted({hint[t] for t in missing}))
        )
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "the OS sandbox needs host root (it writes the sandbox's uid map and enters its "
            f"namespaces); this process runs as uid {os.geteuid()}"
        )
    return {t: str(p) for t, p in found.items()}


def _base_accounts() -> tuple[list[str], list[str]]:
    """Debian's pristine passwd and group lines (``base-passwd``), plus Ubuntu's user 1000."""
    if (BASE_PASSWD / "passwd.master").exists():
        pw = (BASE_PASSWD / "passwd.master").read_text().splitlines()
        gr = (BASE_PASSWD / "group.master").read_text().splitlines()
    else:  # base-passwd is essential on Debian; elsewhere the minimum an image has
        pw = [
            "root:*:0:0:root:/root:/bin/bash",
            "nobody:*:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
        ]
        gr = ["root:*:0:", "sudo:*:27:", "users:*:100:", "nogroup:*:65534:"]
    pw = [line for line in pw if line.strip()] + [UBUNTU_USER]
    gr = [line for line in gr if line.strip()] + ["ubuntu:x:1000:"]
    return pw, gr


def clean_etc(host_etc: Path = Path("/etc")) -> list[tuple[str, str, bytes | str, int]]:
    """The clean ``/etc`` of a sandbox, as (kind, path, content, mode) items.

    ``kind`` is ``"dir"``, ``"file"`` (content: bytes) or ``"symlink"`` (content: target);
    ``path`` is absolute inside the sandbox. Accounts are Debian's ``base-passwd`` masters with
    ``x`` passwords, Ubuntu's user 1000, and generated ``shadow``/``gshadow`` with locked
    passwords; the rest is copied from the host's ``/etc`` (:data:`ETC_ALLOW`, never
    :data:`ETC_DENY`, never unreadable files).

    Returns
    -------
    list of tuple
        Directories before their contents.
    """
    pw, gr = _base_accounts()
    passwd = [":".join([f[0], "x", *f[2:]]) for f in (line.split(":") for line in pw)]
    group = [":".join([f[0], "x", *f[2:]]) for f in (line.split(":") for line in gr)]
    shadow = [f"{line.split(':')[0]}:*:19000:0:99999:7:::" for line in pw]
    gshadow = [f"{line.split(':')[0]}:*::" for line in gr]
    items: list[tuple[str, str, bytes | str, int]] = [
        ("file", "/etc/passwd", ("\n".join(passwd) + "\n").encode(), 0o644),
        ("file", "/etc/group", ("\n".join(group) + "\n").encode(), 0o644),
        ("file", "/etc/shadow", ("\n".join(shadow) + "\n").encode(), 0o640),
        ("file", "/etc/gshadow", ("\n".join(gshadow) + "\n").encode(), 0o640),
        ("file", "/etc/hostname", b"sandbox\n", 0o644),
        ("file", "/etc/hosts", b"127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n", 0o644),
        ("file", "/etc/resolv.conf", b"", 0o644),
        ("symlink", "/etc/mtab", "/proc/self/mounts", 0),
    ]
    made = {"/etc"}

    def add_dir(rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            d = "/etc/" + "/".join(parts[:i])
            if d not in made:
                made.add(d)
                items.append(("dir", d, b"", 0o755))

    def add(path: Path) -> None:
        rel = path.relative_to(host_etc).as_posix()
        if rel in ETC_DENY:
            return
        if "/" in rel:
            add_dir(rel.rsplit("/", 1)[0])
        if path.is_symlink():
            items.append(("symlink", "/etc/" + rel, os.readlink(path), 0))
        elif path.is_dir():
            add_dir(rel)
            for child in sorted(path.iterdir()):
                add(child)
        elif path.is_file() and os.access(path, os.R_OK):
            try:
                data = path.read_bytes()
            except OSError:
                return
            items.append(("file", "/etc/" + rel, data, path.stat().st_mode & 0o7777))

    for rel in ETC_ALLOW:
        p = host_etc / rel
        if p.is_symlink() or p.exists():
            add(p)
    return items


_ETC_CACHE: list[tuple[str, str, bytes | str, int]] | None = None


def _etc_items() -> list[tuple[str, str, bytes | str, int]]:
    global _ETC_CACHE
    if _ETC_CACHE is None:
        _ETC_CACHE = clean_etc()
    return _ETC_CACHE


def _limit_procs(n: int) -> None:
    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


class Sandbox:
    """One task's throwaway machine; see the module docstring for what it guarantees.

    Parameters
    ----------
    config : SandboxConfig, optional

    Raises
    ------
    SandboxUnavailable
        ``bwrap``/``nsenter``/``setpriv`` missing, or not root (:func:`require_tools`).
    SandboxError
        ``bwrap`` started but the sandbox did not come up (its message is included).

    Notes
    -----
    ``--die-with-parent`` ties the sandbox to the thread that created it (Linux's parent-death
    signal fires when that thread exits): create and use a sandbox in one thread.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._tools = require_tools()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0  # host pid of the sandbox's pid 1
        self._lock = threading.Lock()
        self._start()

    # -- life cycle -------------------------------------------------------------------------

    def _bwrap_args(self, fds: list[int]) -> list[str]:
        mb = self.config.tmpfs_mb * 1024 * 1024
        a = [self._tools["bwrap"], "--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0"]
        a += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
        # the whole root is one sized tmpfs; /usr/local a second one over the read-only /usr
        a += ["--size", str(mb), "--tmpfs", "/"]
        a += ["--ro-bind", "/usr", "/usr"]
        for link, target in (("/bin", "usr/bin"), ("/sbin", "usr/sbin"), ("/lib", "usr/lib")):
            a += ["--symlink", target, link]
        for lib in ("lib32", "lib64", "libx32"):
            if Path("/usr", lib).is_dir():
                a += ["--symlink", f"usr/{lib}", f"/{lib}"]
        a += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
        for d, mode in ROOT_DIRS.items():
            a += ["--dir", d, "--chmod", f"{mode:o}", d]
        a += ["--size", str(mb), "--tmpfs", "/usr/local"]
        for d in SUBDIRS:
            a += ["--dir", d]
        a += ["--chmod", "1777", "/var/tmp", "--chmod", "1777", "/run/lock"]
        for kind, path, content, mode in _etc_items():
            if kind == "dir":
                a += ["--dir", path]
            elif kind == "symlink":
                a += ["--symlink", str(content), path]
            else:
                fd = os.memfd_create("etc", 0)
                os.write(fd, content if isinstance(content, bytes) else content.encode())
                os.lseek(fd, 0, os.SEEK_SET)
                fds.append(fd)
                a += ["--perms", f"{mode & 0o7777:04o}", "--file", str(fd), path]
        a += ["--cap-drop", "ALL"]
        for cap in CAPABILITIES:
            a += ["--cap-add", f"CAP_{cap}"]
        a += ["--chdir", "/", "--clearenv"]
        for k, v in ENV.items():
            a += ["--setenv", k, v]
        return a

    def _start(self) -> None:
        cfg = self.config
        fds: list[int] = []
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        try:
            args = self._bwrap_args(fds)
            args += ["--info-fd", str(info_w), "--userns-block-fd", str(block_r)]
            args += ["--", "/usr/bin/sleep", "infinity"]
            uid = cfg.uid_base if cfg.mode == "shifted" else 0
            self._proc = subprocess.Popen(
                args,
                pass_fds=(info_w, block_r, *fds),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd="/",
                user=uid,
                group=uid,
                extra_groups=[],
                preexec_fn=lambda: _limit_procs(cfg.max_procs),
            )
        except BaseException:
            for fd in (info_r, info_w, block_r, block_w, *fds):
                os.close(fd)
            raise
        os.close(info_w)
        os.close(block_r)
        try:
            info = self._read_info(info_r)
            self._pid = int(info["child-pid"])
            first = cfg.uid_base if cfg.mode == "shifted" else 0
            for name in ("uid_map", "gid_map"):
                Path(f"/proc/{self._pid}/{name}").write_text(f"0 {first} 65536\n")
            os.write(block_w, b"1")
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        finally:
            for fd in (info_r, block_w, *fds):
                os.close(fd)

    def _read_info(self, fd: int) -> dict[str, int]:
        data = b""
        while b"}" not in data:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SandboxError(f"bwrap did not start: {self._stderr()}")
            data += chunk
        try:
            info: dict[str, int] = json.loads(data[: data.index(b"}") + 1])
        except ValueError as e:
            raise SandboxError(f"bwrap wrote unreadable --info-fd data {data!r}") from e
        return info

    def _stderr(self) -> str:
        p = self._proc
        if p is None or p.stderr is None:
            return ""
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "(still running)"
        return p.stderr.read().decode(errors="replace").strip()

    def _wait_ready(self, limit_s: float = 10.0) -> None:
        """Wait until pid 1 has finished setting up (its root is the new root, not the host's)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s:
            if self._proc is not None and self._proc.poll() is not None:
                raise SandboxError(f"the sandbox exited while starting: {self._stderr()}")
            try:
                # the setup is done once pid 1 has forked the payload (``sleep infinity``)
                kids = Path(f"/proc/{self._pid}/task/{self._pid}/children").read_text().split()
            except OSError:
                kids = []
            if kids:
                return
            time.sleep(0.005)
        raise SandboxError(f"the sandbox did not come up within {limit_s} s")

    @property
    def alive(self) -> bool:
        """Whether the sandbox's first process still runs (a task can kill it: ``kill -9 -1``)."""
        if self._proc is None or self._proc.poll() is not None:
            return False
        try:
            stat = Path(f"/proc/{self._pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")

    def close(self) -> None:
        """Kill the sandbox; the kernel frees its namespaces and tmpfs. Safe to call twice."""
        p = self._proc
        if p is None:
            return
        if p.poll() is None:
            p.kill()  # bwrap: its pid 1 gets SIGKILL from --die-with-parent, the pid ns dies
        p.wait()
        if p.stderr is not None:
            p.stderr.close()
        self._proc = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a sandbox never outlives its object
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to report to
            pass

    # -- commands ---------------------------------------------------------------------------

    def _enter_args(self, script: str) -> list[str]:
        bounding = "-all," + ",".join("+" + c.lower() for c in CAPABILITIES)
        env = [f"{k}={v}" for k, v in ENV.items()]
        return [
            self._tools["nsenter"],
            "--target",
            str(self._pid),
            "--user",
            "--mount",
            "--pid",
            "--net",
            "--ipc",
            "--uts",
            "--cgroup",
            "--root",
            "--wd",  # no argument: the target's cwd; "--wd=/" would resolve on the host
            "--",
            "/usr/bin/setpriv",
            f"--bounding-set={bounding}",
            "--inh-caps=-all",
            "--",
            "/usr/bin/env",
            "-i",
            *env,
            "/bin/bash",
            "-c",
            script,
        ]

    def run(self, script: str, *, timeout_s: float | None = None) -> CommandResult:
        """Run ``bash -c script`` in the sandbox as root, cwd ``/``, ``HOME=/root``.

        Parameters
        ----------
        script : str
        timeout_s : float, optional
            Seconds before the command's process group is killed; default ``config.timeout_s``.

        Returns
        -------
        CommandResult
            A command in a sandbox whose first process is gone (a task killed it) returns
            exit code None and says so in its output.

        Raises
        ------
        InvalidInput
            ``script`` is not a string or holds a NUL byte.
        SandboxError
            The sandbox was closed.
        """
        if not isinstance(script, str) or "\0" in script:
            raise InvalidInput("a command must be a string without NUL bytes")
        limit = self.config.timeout_s if timeout_s is None else timeout_s
        if not limit > 0:
            raise InvalidInput(f"timeout_s must be > 0 seconds, got {timeout_s!r}")
        with self._lock:
            if self._proc is None:
                raise SandboxError("the sandbox is closed")
            if not self.alive:
                return CommandResult(None, ENDED)
            out = os.memfd_create("out", 0)
            t0 = time.monotonic()
            try:
                p = subprocess.Popen(
                    self._enter_args(script),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    cwd="/",
                    start_new_session=True,
                    preexec_fn=lambda: _limit_procs(self.config.max_procs),
                )
                timed_out = False
                try:
                    rc: int | None = p.wait(timeout=limit)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    rc = None
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
                seconds = time.monotonic() - t0
                os.lseek(out, 0, os.SEEK_SET)
                # read one more byte than kept, as bytes ≥ characters in UTF-8
                raw = os.read(out, 4 * self.config.max_output + 1)
            finally:
                os.close(out)
        text = raw.decode(errors="replace")
        truncated = len(text) > self.config.max_output
        if truncated:
            text = text[: self.config.max_output]
        if not self.alive and rc != 0:  # the command could not enter, or ended the sandbox
            return CommandResult(None, ENDED, timed_out, False, seconds)
        return CommandResult(rc, text, timed_out, truncated, seconds)


__all__ = [
    "CAPABILITIES",
    "CommandResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxUnavailable",
    "clean_etc",
    "require_tools",
]
