# The operating-system side of the embedded server (server.py): spawning a nats-server child that dies
# with this process, reading its log and ports files, finding free loopback ports, and a proxy-free
# HTTP GET for its monitoring port.
#
# Rule 1: standard library only, like server.py, which is its only user.
# Rule 2: loopback only; a child is started with PR_SET_PDEATHSIG (Linux) in a new session.
from __future__ import annotations

import concurrent.futures
import ctypes
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["Spawner", "can_connect", "free_ports", "http_get", "port_of", "read_from", "read_ports", "tail"]

_PR_SET_PDEATHSIG = 1


def pdeathsig_preexec() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # Resolved before fork: the child must only make the call, because
        # symbol lookup could take locks that another thread held at fork.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    sigkill = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill)
        if os.getppid() != parent:  # parent died before prctl took effect
            os._exit(1)

    return preexec


class Spawner:
    _lock = threading.Lock()
    _jobs: "queue.SimpleQueue[tuple[Any, Any, concurrent.futures.Future]] | None" = None

    @classmethod
    def popen(cls, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        preexec = pdeathsig_preexec()
        if preexec is None:
            return subprocess.Popen(argv, start_new_session=True, **kwargs)
        kwargs.update(preexec_fn=preexec, start_new_session=True)
        with cls._lock:
            if cls._jobs is None:
                cls._jobs = queue.SimpleQueue()
                threading.Thread(
                    target=cls._run, args=(cls._jobs,), name="nats-server-spawner", daemon=True
                ).start()
        done: concurrent.futures.Future = concurrent.futures.Future()
        cls._jobs.put((argv, kwargs, done))
        return done.result()

    @staticmethod
    def _run(jobs: "queue.SimpleQueue") -> None:
        while True:
            argv, kwargs, done = jobs.get()
            try:
                done.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:  # handed to the caller, not swallowed
                done.set_exception(exc)



def tail(path: Path | None, n: int) -> str:
    if path is None:
        return ""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def read_from(path: Path | None, offset: int) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def read_ports(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # absent or half-written
        return None
    return data if isinstance(data, dict) and data.get("nats") else None


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].rstrip("/"))


def can_connect(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    # Held open together so the n ports are distinct; small race after close
    # is accepted (start() retries a busy fixed port until startup_timeout).
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# No proxies: monitoring is always on loopback and HTTP(S)_PROXY must not apply.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with _HTTP.open(url, timeout=2.0) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc).encode()
