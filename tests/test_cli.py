# The main job runs end to end, against a given server and embedded.
import subprocess
import sys

import pytest

from jetstream_sync.__main__ import main


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
                          timeout=80)
    assert proc.returncode == 0, proc.stderr
    assert "started an embedded nats-server" in proc.stdout
    assert "stopped the embedded nats-server" in proc.stdout


def test_demo_rejects_a_too_small_count(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--count", "3"])
    assert "--count" in capsys.readouterr().err
