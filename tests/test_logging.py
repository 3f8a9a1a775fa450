# Charter: the library's logging. Every module logs through logging.getLogger(__name__) (so under
# "jetstream_sync"), nothing is printed when the application configured no logging (not even WARNING
# and ERROR records, which Python's lastResort handler would otherwise print) except a failing consume
# handler's traceback, shown once as threading.excepthook shows a thread's, the records show up
# under their module's name once logging is configured, and no credential reaches a log line.
from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import jetstream_sync

PACKAGE = Path(jetstream_sync.__file__).resolve().parent
PASSWORD = "Pw-s3cret-91x"

# Makes the library log at every level: a consume handler that raises (ERROR, jetstream_sync.consume),
# a progress block whose stream is deleted under it (WARNING, jetstream_sync.spark._progress), a server
# restart (INFO "reconnected to <url>", jetstream_sync._connection) and a cached Spark connection (DEBUG,
# jetstream_sync.spark._connections). The password is in the URL of both connections.
SCENARIO = r'''
import logging, sys, threading, time
if sys.argv[1] == "debug":
    logging.basicConfig(level=logging.DEBUG, format="%(levelname)s|%(name)s|%(message)s")

import jetstream_sync as jss
import jetstream_sync.spark
from jetstream_sync.server import NatsServer

PASSWORD = sys.argv[2]
config = 'authorization { user: "alice", password: "%s" }\n' % PASSWORD


def wait_until(predicate, what):
    deadline = time.monotonic() + 10
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.01)


with NatsServer(config_text=config) as server:
    url = f"nats://alice:{PASSWORD}@127.0.0.1:{server.port}"
    reconnected = threading.Event()
    with jss.connect(url, name="logging-scenario", reconnected_cb=reconnected.set) as client:
        js = client.jetstream()
        js.create_stream(name="LOGS", subjects=["LOGS.*"])
        js.publish("LOGS.a", b"boom")
        consumer = js.create_consumer("LOGS", durable_name="c", max_deliver=1)

        def handler(msg):
            raise ValueError("the handler fails on purpose")

        with consumer.consume(handler) as handle:
            wait_until(lambda: handle.stats.handler_errors == 1, "the handler error")

        js.create_stream(name="GONE", subjects=["GONE.*"])
        with jss.spark.progress(client, stream="GONE", file=sys.stdout, interval=0.05):
            js.delete_stream("GONE")

        opts = jss.spark.ConnectionOptions(url, name="cached")
        jss.spark.client_for(opts).flush()
        jss.spark.drop(opts)

        server.restart()
        wait_until(reconnected.is_set, "the reconnect")
        js.account_info()
print("scenario done")
'''


def run_scenario(mode: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONWARNINGS")}
    proc = subprocess.Popen([sys.executable, str(script), mode, PASSWORD], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the scenario did not finish within 60 s\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{err[-3000:]}"
    assert "scenario done" in out
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.timeout(90)
def test_without_logging_configured_the_library_prints_only_a_failing_handlers_traceback_once(tmp_path):
    proc = run_scenario("quiet", tmp_path)
    # A handler's exception is shown as an uncaught thread exception is (threading.excepthook), once;
    # no other record (the WARNING, the INFO reconnect, DEBUG) is printed.
    assert proc.stderr.startswith("Exception in thread jetstream-sync-worker-c-0:\nTraceback"), proc.stderr
    assert proc.stderr.count("Traceback") == 1 and "|" not in proc.stderr
    assert proc.stderr.rstrip().endswith("pass error_handler= to handle errors yourself."), proc.stderr
    assert "ValueError: the handler fails on purpose" in proc.stderr and PASSWORD not in proc.stderr


@pytest.mark.timeout(90)
def test_with_basic_config_the_records_appear_under_their_module_loggers_without_credentials(tmp_path):
    proc = run_scenario("debug", tmp_path)
    records = [line.split("|", 2) for line in proc.stderr.splitlines() if line.count("|") >= 2]
    ours = {(level, name) for level, name, _ in records if name.startswith("jetstream_sync")}
    assert ("ERROR", "jetstream_sync.consume") in ours, proc.stderr
    assert ("WARNING", "jetstream_sync.spark._progress") in ours, proc.stderr
    assert ("INFO", "jetstream_sync._connection") in ours, proc.stderr
    assert ("DEBUG", "jetstream_sync.spark._connections") in ours, proc.stderr
    # Every record of the library comes from a logger named after a module of the package.
    modules = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
               for p in PACKAGE.rglob("*.py")}
    assert {name for _, name in ours} <= modules
    # The URL was logged, with its password masked.
    reconnect = [msg for level, name, msg in records if name == "jetstream_sync._connection" and "reconnected" in msg]
    assert reconnect and "alice:***@127.0.0.1" in reconnect[0], proc.stderr
    assert PASSWORD not in proc.stderr and PASSWORD not in proc.stdout


def test_every_module_of_the_package_logs_through_a_logger_named_after_itself():
    found = {}
    for info in pkgutil.walk_packages(jetstream_sync.__path__, "jetstream_sync."):
        module = importlib.import_module(info.name)
        for attr, value in vars(module).items():
            if isinstance(value, logging.Logger):
                found[f"{info.name}.{attr}"] = value.name
    assert "jetstream_sync._connection.log" in found and "jetstream_sync.spark._progress.log" in found
    assert {where: name for where, name in found.items() if name != where.rsplit(".", 1)[0]} == {}


def test_the_package_logger_has_a_null_handler_and_leaves_levels_to_the_application():
    logger = logging.getLogger("jetstream_sync")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    assert logger.level == logging.NOTSET and logger.propagate
