# Charter: the chaos soak (benchmarks/soak_chaos.py) in its short form, as a user runs it: a subprocess
# with a hard timeout whose whole process group (the cluster, Spark's JVM) is killed if it hangs. About
# 75 s of every workload at once on a 3-node cluster, with at least one SIGKILL and restart, one SIGSTOP
# freeze and one leader step-down; it must exit 0 with every check holding, nothing lost, nothing twice.
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parent.parent / "benchmarks" / "soak_chaos.py"
#: The checks the soak prints, one line each (the Spark copy's included).
CHECKS = 11

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.faults, pytest.mark.spark]


@pytest.mark.timeout(900)
def test_a_short_chaos_soak_loses_nothing_and_stores_nothing_twice(tmp_path):
    # Gentle but real: a fault every 6-10 s once 15 s of warm-up are over, each kind at least once (the soak
    # goes on until every kind happened), the cluster settled before the next; the seed fixes their order.
    cmd = [sys.executable, str(SOAK), "--duration", "75", "--chaos-interval", "6:10", "--seed", "29"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the soak did not finish within 840 s\nstdout:\n{out}\nstderr (end):\n{err[-3000:]}")
    lines = out.splitlines()
    shown = f"exit {proc.returncode}\nstdout:\n{out}\nstderr (end):\n{err[-3000:]}"
    assert proc.returncode == 0, shown
    checks = [line for line in lines if line.startswith("check: ")]
    assert len(checks) == CHECKS and all(": ok  (" in line for line in checks), shown
    summary = lines[-1]
    print(summary)
    assert summary.startswith("soak_chaos PASS: "), shown
    faults = re.search(r"faults \d+ \((\d+) kill, (\d+) freeze, (\d+) step-down\)", summary)
    assert faults and all(int(n) >= 1 for n in faults.groups()), summary
    assert "lost 0, duplicates 0;" in summary, summary
