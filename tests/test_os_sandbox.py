"""Containment of the OS environment's sandbox (issue 23, item 5).

These tests never skip: on a host without ``bwrap`` (or without root) they fail with the
install hint, so CI cannot pass without running them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from memcurator.envs.os.sandbox import (
    CAPABILITIES,
    Sandbox,
    SandboxConfig,
    SandboxError,
    SandboxUnavailable,
    clean_etc,
    require_tools,
)
from memcurator.errors import InvalidInput


@pytest.fixture(scope="module", autouse=True)
def _tools() -> None:
    require_tools()  # raises SandboxUnavailable with the install command: a failure, not a skip


@pytest.fixture
def box():
    with Sandbox(SandboxConfig(timeout_s=10)) as b:
        yield b


def _mounts() -> list[str]:
    return Path("/proc/mounts").read_text().splitlines()


def test_runs_as_root_in_a_fresh_root(box: Sandbox) -> None:
    r = box.run("id -u; pwd; echo $HOME; ls /")
    lines = r.output.split()
    assert r.ok and lines[:3] == ["0", "/", "/root"]
    assert "work" not in lines and "farm" not in lines
    assert set(lines[3:]) <= {
        "bin", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt",
        "proc", "root", "run", "sbin", "srv", "tmp", "usr", "var",
    }  # fmt: skip


def test_host_files_are_invisible(box: Sandbox, tmp_path: Path) -> None:
    marker = Path("/tmp") / f"memcurator-marker-{uuid.uuid4().hex}"
    marker.write_text("host secret")
    root_marker = Path("/root") / f".memcurator-marker-{uuid.uuid4().hex}"
    root_marker.write_text("host secret")
    try:
        listing = box.run("ls -a /tmp /root").output
        assert marker.name not in listing and root_marker.name not in listing
        r = box.run(f"cat {marker} {root_marker}; ls {tmp_path}")
        assert "host secret" not in r.output and r.exit_code != 0
        assert not box.run(f"test -e {marker} || test -e {root_marker} || test -e {tmp_path}").ok
        # the host's accounts are not the sandbox's
        host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()}
        inside = set(box.run("cut -d: -f1 /etc/passwd").output.split())
        assert "ubuntu" in inside and "root" in inside
        assert inside - {"ubuntu"} <= host_users | {"_apt", "irc", "list", "news", "uucp"}
        assert box.run("cat /etc/shadow").output.startswith("root:*:")
    finally:
        marker.unlink()
        root_marker.unlink()


def test_no_network_but_loopback(box: Sandbox) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        ifaces = box.run("ls /sys/class/net 2>/dev/null || tail -n +3 /proc/net/dev")
        names = {line.split(":")[0].strip() for line in ifaces.output.splitlines() if line}
        assert names == {"lo"}, ifaces.output
        r = box.run(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
        assert not r.ok and "connected" not in r.output
        srv.settimeout(0.2)
        with pytest.raises(TimeoutError):
            srv.accept()  # nothing reached the host's listener
        r = box.run("exec 3<>/dev/tcp/1.1.1.1/80 && echo connected")
        assert not r.ok and "connected" not in r.output
    finally:
        srv.close()


def test_capabilities_are_dockers_default_less_mknod_and_net_raw(box: Sandbox) -> None:
    caps = dict(
        line.split(":\t") for line in box.run("grep ^Cap /proc/self/status").output.splitlines()
    )
    bits = {
        "CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
        "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "SYS_CHROOT": 18, "AUDIT_WRITE": 29,
        "SETFCAP": 31,
    }  # fmt: skip
    want = sum(1 << bits[c] for c in CAPABILITIES)
    assert int(caps["CapEff"], 16) == want and int(caps["CapBnd"], 16) == want
    assert not box.run("mknod /tmp/d b 8 0").ok  # no MKNOD
    assert not box.run("mount -t tmpfs none /mnt").ok  # no SYS_ADMIN


def test_rm_rf_root_touches_nothing_outside(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "file").write_text("x")
    passwd = Path("/etc/passwd").read_bytes()
    usr_count = len(os.listdir("/usr/bin"))
    with Sandbox(SandboxConfig(timeout_s=15)) as b:
        b.run("rm -rf --no-preserve-root / 2>/dev/null; true")
    assert (keep / "file").read_text() == "x"
    assert Path("/etc/passwd").read_bytes() == passwd
    assert len(os.listdir("/usr/bin")) == usr_count
    with Sandbox() as b2:  # the next sandbox is intact
        assert b2.run("ls /etc/passwd /usr/bin/bash && id -u").ok


def test_account_changes_never_reach_the_host(box: Sandbox) -> None:
    before = {p: Path(p).read_bytes() for p in ("/etc/passwd", "/etc/group", "/etc/shadow")}
    name = f"mc{uuid.uuid4().hex[:8]}"
    r = box.run(
        f"useradd -m {name} && echo '{name}:pw' | chpasswd && groupadd g{name} && "
        f"usermod -aG sudo,g{name} {name} && chsh -s /bin/sh {name} && id {name}"
    )
    assert r.ok, r.output
    assert f"g{name}" in r.output
    for p, data in before.items():
        assert Path(p).read_bytes() == data, p
    assert not Path("/home", name).exists()
    # a file the sandbox's root creates belongs to no host account
    assert box.run("touch /tmp/owned && chown 0:0 /tmp/owned").ok


def test_sandbox_writes_stay_inside(box: Sandbox) -> None:
    assert not box.run("touch /usr/bin/memcurator-escape").ok
    assert not Path("/usr/bin/memcurator-escape").exists()
    assert box.run("touch /usr/local/bin/tool && ls /usr/local/bin").output.strip() == "tool"
    assert not Path("/usr/local/bin/tool").exists()
    assert not box.run("echo 1 > /proc/sys/kernel/hostname").ok


def test_state_persists_across_commands(box: Sandbox) -> None:
    assert box.run("useradd alice && mkdir -p /srv/x && echo hi > /srv/x/f").ok
    assert box.run("id -u alice && cat /srv/x/f").output.split() == ["1001", "hi"]
    # a background job outlives its command and does not block it
    t0 = time.monotonic()
    assert box.run("(sleep 1; touch /tmp/later) & echo started").output == "started\n"
    assert time.monotonic() - t0 < 1.0
    time.sleep(1.5)
    assert box.run("test -f /tmp/later").ok


def test_the_root_is_one_file_system(box: Sandbox) -> None:
    """Hard links and renames work between /var, /etc, /home, /root and / (tasks 118, 158)."""
    r = box.run(
        "touch /var/a /etc/b && mkdir -p /home/u && ln /var/a /a && ln /etc/b /root/b && "
        "ln /a /home/u/a && mv /var /var2 && mv /var2 /var && stat -c %h /var/a"
    )
    assert r.ok and r.output.strip() == "3", r.output


def test_timeout_kills_a_hung_command() -> None:
    with Sandbox(SandboxConfig(timeout_s=1.0)) as b:
        t0 = time.monotonic()
        r = b.run("echo before; sleep 30; echo after")
        assert r.timed_out and r.exit_code is None and not r.ok
        assert time.monotonic() - t0 < 5
        assert r.output == "before\n"
        assert "sleep 30" not in b.run("ps -eo args").output  # the process group is gone
        assert b.run("echo alive").output == "alive\n"  # the sandbox lives on
        assert b.run("sleep 3", timeout_s=0.5).timed_out


def test_output_is_truncated() -> None:
    with Sandbox(SandboxConfig(max_output=100)) as b:
        r = b.run("yes x | head -c 100000")
        assert r.truncated and len(r.output) == 100
        r = b.run("printf 'é%.0s' $(seq 30)")  # multibyte: counted in characters
        assert r.output == "é" * 30 and not r.truncated


def test_exit_codes_and_stderr(box: Sandbox) -> None:
    r = box.run("echo out; echo err >&2; exit 7")
    assert r.exit_code == 7 and "out" in r.output and "err" in r.output


def test_bad_input_is_refused(box: Sandbox) -> None:
    with pytest.raises(InvalidInput):
        box.run("echo \0")
    with pytest.raises(InvalidInput):
        box.run("true", timeout_s=0)
    with pytest.raises(InvalidInput):
        SandboxConfig(mode="host")
    box.close()
    with pytest.raises(SandboxError):
        box.run("true")


def test_a_sandbox_killed_from_inside_reports_it(box: Sandbox) -> None:
    box.run("kill -9 -1")
    r = box.run("echo hi")
    assert r.exit_code is None and "ended" in r.output


_CHILD = textwrap.dedent(
    """
    import sys, time
    from memcurator.envs.os.sandbox import Sandbox, SandboxConfig
    box = Sandbox(SandboxConfig(uid_base=int(sys.argv[1])))
    box.run("useradd victim && mkdir -p /var/log/x && (sleep 300 &)")
    print(box._pid, box._proc.pid, flush=True)
    box.run("sleep 300")
    """
)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_kill_9_of_the_runner_leaves_nothing_behind() -> None:
    mounts = _mounts()
    tmp_before = set(os.listdir("/tmp"))
    uid = 1_300_000_000 + 65536 * (os.getpid() % 1000)  # this test's own host uids
    p = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(uid)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    sandbox_pid, bwrap_pid = map(int, p.stdout.readline().split())
    assert _pid_alive(sandbox_pid)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 10
    while (_pid_alive(sandbox_pid) or _pid_alive(bwrap_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(sandbox_pid) and not _pid_alive(bwrap_pid)
    assert _mounts() == mounts
    assert set(os.listdir("/tmp")) - tmp_before == set()
    # no live process of the sandbox's host uid is left (zombies wait for the host's pid 1)
    pids = subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout
    assert [pid for pid in pids.split() if _pid_alive(int(pid))] == []


def test_close_leaves_no_mounts_or_processes() -> None:
    mounts = _mounts()
    tmp_before = set(os.listdir("/tmp"))
    b = Sandbox()
    b.run("(sleep 100 &); mkdir -p /tmp/a /var/log/b")
    pid = b._pid
    b.close()
    b.close()  # twice is fine
    deadline = time.monotonic() + 5
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(pid)
    assert _mounts() == mounts
    assert set(os.listdir("/tmp")) - tmp_before == set()


def test_clean_etc_holds_no_host_secrets() -> None:
    items = {path: content for _kind, path, content, _mode in clean_etc()}
    assert "/etc/security/opasswd" not in items
    for secret in ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers"):
        assert not any(p.startswith(secret) for p in items)
    host_shadow = Path("/etc/shadow").read_bytes()
    assert items["/etc/shadow"] != host_shadow
    assert all(line.split(":")[1] == "*" for line in items["/etc/shadow"].decode().splitlines())


def test_missing_bwrap_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        require_tools()
