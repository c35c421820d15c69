"""The peer group over HTTP: each agent its own OS process and store, exchanging through a hub.

``memcurator bench --peers M --transport http`` runs the group run with outside traffic of
:func:`memcurator.bench.peers.run_group` this way (CURATOR Sec. III-D, Fig. 4: nodes and a hub
over a real link):

- a hub: ``memcurator serve`` in a subprocess on 127.0.0.1 (a free port), with one API key per
  agent in one group namespace (scope ``peer``; the key's name is the agent's id), shut down
  after the run;
- M agent processes (``multiprocessing`` spawn), each with its own SQLite store file and its
  own key. Every R tasks an agent publishes its query sketch (a value-sharing policy), waits
  for the others' sketches of the round, pushes one message per receiver (its share under
  L / (M - 1), or the broadcast, even when empty: the message closes its round), then pulls
  until every other agent's message of the round arrived and offers them to its memory in
  agent order. The agents' draws are made by each process from the same seed
  (:func:`~memcurator.bench.peers.draw_plan`), so the run does what the in-process run does.

The uplink is counted twice: ``uplink_bytes_per_round`` is the in-process figure (the frames
:func:`~memcurator.bench.peers.encode` would write on a loopback link), and the wire figures
are what the agents' HTTP clients sent and received for their pushes
(:class:`memcurator.client.WireBytes`): request and response bodies
(``wire_bytes_per_round``), header bytes apart (``wire_header_bytes_per_round``), and every
hub call's bodies (``wire_all_bytes_per_round``: pushes, pulls, sketches). All per agent and
round, as the in-process figure.

References
----------
CURATOR, Sec. III-D (Share and Trust under an uplink budget L), Fig. 4 (nodes and a hub).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from memcurator.bench.peers import PeerConfig, _PeerAgent, _summarize, draw_plan, encode
from memcurator.errors import RunsFailed, StoreError

#: seconds an agent waits for the others at a round (sketches, messages) before it gives up
ROUND_TIMEOUT_S = 600.0
#: seconds the hub may take to answer its first health check
HUB_START_S = 60.0
#: a group namespace of the hub
GROUP = "peers"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HubServer:
    """``memcurator serve`` on 127.0.0.1 in a subprocess, with one peer key per agent.

    Use as a context manager; on exit the server is terminated (killed if it does not stop
    within 10 s) and its folder removed.

    Parameters
    ----------
    names : list of str
        The agents; each gets a key of scope ``peer`` named after it in namespace
        :data:`GROUP`.

    Raises
    ------
    MissingExtra
        The ``serve`` extra (fastapi, uvicorn) is not installed.
    StoreError
        The server did not answer within :data:`HUB_START_S` seconds (its log is in the
        message).
    """

    def __init__(self, names: list[str]):
        from memcurator.service import require_extra

        require_extra()
        self.names = names
        self._dir = tempfile.TemporaryDirectory(prefix="memcurator-hub-")
        self.tokens: dict[str, str] = {}
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HubServer:
        from memcurator.client import Client
        from memcurator.service.keys import KeyTable

        d = Path(self._dir.name)
        store, keys = str(d / "hub.db"), str(d / "hub.keys")
        table = KeyTable(keys)
        for n in self.names:
            _, self.tokens[n] = table.create(GROUP, name=n, scopes=("peer",), origin="peer")
        table.close()
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(d / "hub.log", "wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "memcurator.cli", "serve", store, "--keys", keys]
            + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + HUB_START_S
        with Client(self.url, key=self.tokens[self.names[0]], timeout=2) as c:
            while True:
                try:
                    c.health()
                    break
                except StoreError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        self.__exit__()
                        raise StoreError(f"the hub did not start: {self.log()[-2000:]}") from None
                    time.sleep(0.2)
        return self

    def log(self) -> str:
        try:
            return (Path(self._dir.name) / "hub.log").read_text(errors="replace")
        except OSError:
            return ""

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            self._proc = None
        self._log.close()
        self._dir.cleanup()


def _agent_main(args: dict[str, Any], out_path: str) -> None:
    """One agent process: run the agent's stream, exchanging through the hub; write the
    agent's part (tallies, records, per-round bytes) or the error, pickled, to ``out_path``."""
    try:
        result = _run_agent(**args)
        payload: dict[str, Any] = {"ok": True, "result": result}
    except BaseException as e:  # reported to the parent, which stops the run
        payload = {"ok": False, "error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()}
    with open(out_path + ".tmp", "wb") as f:
        pickle.dump(payload, f)
    os.replace(out_path + ".tmp", out_path)


class _Backoff:
    """Sleeps between polls of the hub: 5 ms, doubling to at most 200 ms."""

    def __init__(self) -> None:
        self.s = 0.005

    def __call__(self) -> None:
        time.sleep(self.s)
        self.s = min(0.2, self.s * 2)


def _run_agent(
    i: int,
    policy_name: str,
    families: list[Any],
    executor: Any,
    cfg: PeerConfig,
    url: str,
    token: str,
    store: str,
) -> dict[str, Any]:
    from memcurator.client import Client

    plan = draw_plan(families, cfg, outside=True)
    agent = _PeerAgent(i, plan, policy_name, executor, cfg, outside=True, store=store)
    me, names = agent.name, plan.names
    others = [n for n in names if n != me]
    frame_bytes: list[int] = []
    push_body: list[int] = []
    push_headers: list[int] = []
    all_body: list[int] = []
    inbox: dict[int, dict[str, list[Any]]] = {}
    cursor = 0
    k = 0
    try:
        with Client(url, key=token, timeout=60) as c:
            for t in range(cfg.n_tasks):
                agent.step(t)
                if (t + 1) % cfg.share_every:
                    continue
                k += 1
                at_start = c.wire.copy()
                sketches: dict[str, np.ndarray | None] = dict.fromkeys(others)
                if agent.mem.policy.can_share:
                    c.hub_publish_sketch(agent.mem.sketch.tolist(), round=k)
                    deadline = time.monotonic() + ROUND_TIMEOUT_S
                    wait = _Backoff()
                    got: dict[str, tuple[int, list[float]]] = {}
                    while True:  # ask only for the sketches still missing
                        missing = [n for n in others if n not in got]
                        got.update(c.hub_sketches(min_round=k, peers=missing))
                        if all(n in got for n in others):
                            break
                        if time.monotonic() > deadline:
                            raise StoreError(f"{me}: no sketches of round {k} from every peer")
                        wait()
                    sketches = {n: np.asarray(got[n][1], dtype=np.float64) for n in others}
                sent = 0
                pushed = c.wire.copy()
                for r in others:
                    items = agent.outbox(r, sketches[r])
                    sent += sum(4 + len(encode(e, me)) for e in items)
                    c.hub_push(items, to=r, round=k)
                push = c.wire.minus(pushed)
                agent.end_round(t)
                deadline = time.monotonic() + ROUND_TIMEOUT_S
                wait = _Backoff()
                while len(inbox.get(k, {})) < len(others):
                    msgs, cursor = c.hub_pull(cursor)
                    for s, rnd, items in msgs:
                        if s in inbox.setdefault(rnd, {}):
                            raise StoreError(f"{me}: two messages of round {rnd} from {s}")
                        inbox[rnd][s] = items
                    if len(inbox.get(k, {})) < len(others):
                        if time.monotonic() > deadline:
                            raise StoreError(f"{me}: round {k} incomplete: {sorted(inbox[k])}")
                        wait()
                for s in others:  # in agent order, as the loopback run delivers them
                    agent.take(s, inbox[k].pop(s))
                del inbox[k]
                frame_bytes.append(sent)
                push_body.append(push.bodies)
                push_headers.append(push.headers)
                all_body.append(c.wire.minus(at_start).bodies)
    finally:
        part = agent.finish()
    part.update(
        frame_bytes=frame_bytes, push_body=push_body, push_headers=push_headers, all_body=all_body
    )
    return part


def run_group_http(
    policy_name: str, families: list[Any], executor: Any, cfg: PeerConfig
) -> tuple[float, dict[str, Any]]:
    """:func:`~memcurator.bench.peers.run_group` with outside traffic, over HTTP.

    Returns
    -------
    accuracy, details
        As :func:`~memcurator.bench.peers.run_group`, and in ``details`` the wire figures per
        agent and round (bytes): ``wire_bytes_per_round`` (push request + response bodies),
        ``wire_header_bytes_per_round`` (their headers), ``wire_all_bytes_per_round`` (the
        bodies of every hub call: sketches, pushes, pulls); ``transport`` = ``"http"``.

    Raises
    ------
    RunsFailed
        An agent process failed or stopped (its error and traceback in the message); the
        others are stopped.
    MissingExtra
        The ``serve`` extra is missing.
    """
    names = [f"agent{i}" for i in range(cfg.peers)]
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="memcurator-peers-") as d, HubServer(names) as hub:
        procs = []
        outs = []
        for i, n in enumerate(names):
            out = os.path.join(d, f"{n}.pickle")
            args = {
                "i": i,
                "policy_name": policy_name,
                "families": families,
                "executor": executor,
                "cfg": cfg,
                "url": hub.url,
                "token": hub.tokens[n],
                "store": os.path.join(d, f"{n}.db"),
            }
            p = ctx.Process(target=_agent_main, args=(args, out), name=f"memcurator-{n}")
            p.start()
            procs.append(p)
            outs.append(out)
        try:
            failed = _wait(procs, outs)
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
                p.join(timeout=10)
        if failed:
            raise RunsFailed(failed + f"\nhub log:\n{hub.log()[-2000:]}")
        parts = []
        for out in outs:
            with open(out, "rb") as f:
                parts.append(pickle.load(f)["result"])

    def totals(key: str) -> list[int]:  # every agent ran the same rounds
        return [sum(x) for x in zip(*(p[key] for p in parts), strict=True)]

    acc, det = _summarize(cfg, parts, totals("frame_bytes"))

    def per_round(key: str) -> float:
        t = totals(key)
        return float(np.mean(t)) / cfg.peers if t else 0.0

    det.update(
        transport="http",
        wire_bytes_per_round=per_round("push_body"),
        wire_header_bytes_per_round=per_round("push_headers"),
        wire_all_bytes_per_round=per_round("all_body"),
    )
    return acc, det


def _wait(procs: list[Any], outs: list[str]) -> str:
    """Wait for every agent; the first failure's report ('' if none), the others left to the
    caller to stop."""
    while True:
        for p, out in zip(procs, outs, strict=True):
            if os.path.exists(out):
                with open(out, "rb") as f:
                    res = pickle.load(f)
                if not res["ok"]:
                    return f"{p.name} failed: {res['error']}\n{res['tb']}"
            elif not p.is_alive():
                p.join()
                return f"{p.name} stopped (exit code {p.exitcode}) without a result"
        if all(os.path.exists(o) for o in outs):
            return ""
        time.sleep(0.05)


__all__ = ["GROUP", "HubServer", "run_group_http"]
