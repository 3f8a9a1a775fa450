# Charter: the jetstream-sync command line as a whole, through the real console script: help and
# exit codes, one-line usage errors (exit 2), connection flags before or after the command and
# $NATS_URL, an unreachable server (exit 4), -v logging, Ctrl-C (exit 130), and the demo.
# The helpers here (`cli`, `ok`, `fails`, `as_json`, `interrupted`) are shared by the other test_cli_*.py files.
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync as jss
from jetstream_sync.__main__ import main
from jetstream_sync.cli import build_parser

from conftest import wait_for

#: The installed console script, next to the interpreter running the tests.
CLI = Path(sys.executable).parent / "jetstream-sync"
ERROR = "jetstream-sync: error: "


def cli_env(server: Any = None, **extra: str) -> dict[str, str]:
    """The environment for a CLI run: NATS_URL is the given server's URL, or unset."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    if server is not None:
        env["NATS_URL"] = server if isinstance(server, str) else server.url
    env.update(extra)
    return env


def cli(*args: str, server: Any = None, input: str | None = None, timeout: float = 30.0,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the console script with ``args`` (NATS_URL pointing at ``server``) and wait for it; stdin is
    ``input``, or empty: never a terminal, so nothing is asked."""
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=timeout,
                          input=input if input is not None else "", env=env if env is not None else cli_env(server))


def interrupted(args: list[str], server: Any, ready: Any, what: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run the console script, wait until ``ready()`` holds, send SIGINT (Ctrl-C); return the ended
    process and how many seconds it took to end after the signal."""
    proc = subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(server))
    try:
        wait_for(ready, timeout=10, what=what)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), took


def ok(proc: subprocess.CompletedProcess) -> str:
    """Assert exit 0 and a silent stderr; return stdout."""
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stderr == "", proc.stderr
    return proc.stdout


def as_json(proc: subprocess.CompletedProcess) -> Any:
    """Assert success and return stdout parsed as one JSON document."""
    return json.loads(ok(proc))


def fails(proc: subprocess.CompletedProcess, code: int, match: str) -> str:
    """Assert exit ``code``, nothing on stdout and exactly one stderr line matching ``match``; return it."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}\nstderr:\n{proc.stderr}"
    assert len(lines) == 1, f"wanted one stderr line, got:\n{proc.stderr}"
    assert lines[0].startswith(ERROR), lines[0]
    assert re.search(match, lines[0]), f"{match!r} not in {lines[0]!r}"
    assert proc.stdout == ""
    return lines[0]


def unused_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"nats://127.0.0.1:{port}"


# --- help and usage errors ------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_help_lists_every_command_and_the_exit_codes():
    out = ok(cli("--help"))
    for command in ("account", "stream", "consumer", "pub", "sub", "events", "server", "demo"):
        assert re.search(rf"^\s+{command}\s", out, re.M), command
    for code in ("0", "1", "2", "3", "4", "130"):
        assert re.search(rf"^\s+{code}\s+\S", out, re.M), f"exit code {code} not in the epilog"
    sub = ok(cli("stream", "--help"))
    for command in ("add", "ls", "info", "edit", "cp", "purge", "rmm", "get", "rm"):
        assert re.search(rf"^\s+{command}\s", sub, re.M), command


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (command path, parser) of the tree below ``parser``, aliases once."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield from _commands(child, path + (name,))


@pytest.mark.timeout(30)
def test_connection_options_are_listed_once_and_every_argument_has_help():
    top = ok(cli("--help"))
    assert "--tlsca FILE" in top and "--timeout DURATION" in top
    commands = list(_commands(build_parser()))
    assert len(commands) > 25
    for path, parser in commands[1:]:
        shown = parser.format_help()
        assert "--tlsca" not in shown.partition("connection options (")[0], path  # only in the closing note
        assert "see jetstream-sync --help" in shown, path
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{' '.join(path)}: {action.metavar or action.dest} has no help"
    short = ok(cli("stream", "info", "--help"))
    assert len(short.splitlines()) < 20 and "the stream to show" in short


@pytest.mark.timeout(120)
@pytest.mark.parametrize("argv", [["--help"], ["stream", "add", "--help"], ["consumer", "next", "S"],
                                  ["stream", "add", "X", "--max-age", "5x"]])
def test_help_and_usage_errors_load_no_client(argv):
    # The client (nats-py, asyncio), attrs and tqdm load when a command uses them, not for --help or a
    # usage error: those answer at once.
    probe = ("import contextlib, io, sys\nfrom jetstream_sync.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             f"    main({argv!r})\n"
             "print(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env=cli_env())
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert not loaded & {"nats", "asyncio", "attrs", "tqdm", "jetstream_sync.client", "jetstream_sync.server"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, flag", [
    (["stream", "add", "BAD", "--max-age", "5x"], "--max-age"),
    (["stream", "add", "BAD", "--max-bytes", "10QB"], "--max-bytes"),
    (["stream", "add", "BAD", "--storage", "tape"], "--storage"),
    (["consumer", "add", "S", "C", "--ack-wait", "fast"], "--ack-wait"),
    (["stream", "add", "BAD", "--max-msgs", "-5"], "--max-msgs"),
    (["consumer", "next", "S", "C", "--timeout", "soon"], "--timeout"),
    (["consumer", "next", "S", "C", "--wait", "soon"], "--wait"),
    (["pub", "S", "--count", "0"], "--count"),
    (["pub", "S", "-H", "no-colon"], "--header"),
    (["--timeout", "x", "account", "info"], "--timeout"),
    (["--creds", "/nonexistent/user.creds", "account", "info"], "--creds"),
    (["stream", "ls", "--bogus"], "--bogus"),
    (["stream"], "required"),
    (["launch"], "invalid choice"),
    (["stream", "add", "a.b", "--subjects", "x"], "name 'a.b' is invalid"),
    (["stream", "add", "S"], "--subjects is required"),
    (["consumer", "add"], "STREAM is required"),
    (["consumer", "add", "S"], "NAME (or --ephemeral) is required"),
    (["consumer", "add", "S", "C", "--pull", "--target", "t"], "--pull with --target"),
    (["consumer", "add", "S", "C", "--sample", "101"], "--sample"),
    (["consumer", "add", "S", "C", "--deliver", "yesterday"], "--deliver"),
    (["stream", "rm", "S"], "give -f"),
    (["stream", "purge", "S"], "give -f"),
    (["stream", "rmm", "S", "1"], "give -f"),
    (["consumer", "rm", "S", "C"], "give -f"),
    (["stream", "get", "S"], "SEQ or --last-for"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_flags_and_values_give_one_error_line_naming_them_and_exit_2(nats_server, args, flag):
    fails(cli(*args, server=nats_server), 2, re.escape(flag))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", [["stream", "add", "X"], ["consumer", "add", "S", "C"], ["server"]])
def test_a_config_file_that_is_not_utf8_is_a_usage_error_naming_the_flag(nats_server, tmp_path, command):
    binary = tmp_path / "config.bin"
    binary.write_bytes(bytes(range(128, 256)))
    server = None if command == ["server"] else nats_server
    fails(cli(*command, "--config", str(binary), server=server), 2, "--config: .* UTF-8")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("typo", [["--pasword", "Hunter2-secret"], ["--pasword=Hunter2-secret"]])
def test_a_mistyped_flag_is_named_without_echoing_the_value_given_with_it(nats_server, typo):
    line = fails(cli("account", "info", *typo, server=nats_server), 2, "unrecognized arguments: --pasword")
    assert "Hunter2" not in line


# --- connecting -------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_an_unreachable_server_exits_4_promptly():
    started = time.monotonic()
    fails(cli("-s", unused_url(), "account", "info"), 4, "could not connect")
    assert time.monotonic() - started < 5.0


@pytest.mark.timeout(30)
def test_connection_flags_work_before_and_after_the_command_and_nats_url_is_the_default(nats_server):
    nowhere = unused_url()
    before = as_json(cli("-s", nats_server.url, "--json", "account", "info", server=nowhere))
    after = as_json(cli("account", "info", "--json", "-s", nats_server.url, server=nowhere))
    from_env = as_json(cli("account", "info", "--json", server=nats_server))
    for doc in (before, after, from_env):
        assert {"memory", "storage", "streams", "consumers", "limits"} <= doc.keys()


@pytest.mark.timeout(30)
def test_verbose_logs_the_connection_to_stderr_and_the_default_is_quiet(nats_server):
    quiet = cli("account", "info", server=nats_server)
    assert ok(quiet).startswith("Connected to:")
    loud = cli("-v", "account", "info", server=nats_server)
    assert loud.returncode == 0
    assert f"INFO jetstream_sync.cli._session: connecting to {nats_server.url}" in loud.stderr
    assert "DEBUG" not in loud.stderr


@pytest.mark.timeout(30)
def test_ctrl_c_during_a_blocking_pull_exits_130_with_one_line(js, nats_server):
    js.create_stream(name="CLI_INTR", subjects=["cli.intr"], storage="memory")
    consumer = js.create_consumer("CLI_INTR", durable_name="waiter")
    proc, took = interrupted(["consumer", "next", "CLI_INTR", "waiter", "--wait", "60s"], nats_server,
                             lambda: consumer.info().num_waiting >= 1, "the CLI's pull to reach the server")
    assert proc.returncode == 130
    assert took < 3.0
    assert proc.stderr.splitlines() == [f"{ERROR}interrupted"] and proc.stdout == ""


# --- demo -------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_demo_runs_against_a_given_server(nats_server, capsys):
    assert main(["demo", "--server", nats_server.url, "--count", "100"]) == 0
    out = capsys.readouterr().out
    assert "published 100 orders" in out
    assert "duplicate=True" in out
    assert "closed the client" in out


@pytest.mark.timeout(90)
def test_demo_starts_and_stops_an_embedded_server_as_a_console_command():
    proc = subprocess.run([sys.executable, "-m", "jetstream_sync", "demo"], capture_output=True, text=True,
                          timeout=80, env=cli_env())
    assert proc.returncode == 0, proc.stderr
    assert "started an embedded nats-server" in proc.stdout
    assert "stopped the embedded nats-server" in proc.stdout


@pytest.mark.timeout(60)
def test_demo_console_script_uses_the_server_flag_and_shows_progress_when_asked(nats_server):
    proc = cli("-s", nats_server.url, "demo", "--count", "64", "--progress")
    assert proc.returncode == 0, proc.stderr
    assert "started an embedded" not in proc.stdout
    assert "published 64 orders" in proc.stdout and "closed the client" in proc.stdout
    assert "64/64" in proc.stderr  # the tqdm bar, on stderr only
    with jss.connect(nats_server.url) as client:
        assert "ORDERS" not in list(client.jetstream().stream_names())  # the demo cleans up after itself


def test_demo_rejects_a_too_small_count(capsys):
    assert main(["demo", "--count", "3"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{ERROR}demo: argument --count: invalid value '3': expected an integer >= 32"]
