# Charter: the runnable examples in examples/ keep working. Each runs as a user would run it, in a
# subprocess from a directory other than the repository root, with a hard timeout; the whole process group
# (the JVM Spark starts included) is killed if it hangs. One Spark startup in all.
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, cwd: Path, timeout: float) -> tuple[int, str, str]:
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / name)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{name} did not finish within {timeout:.0f} s\nstdout:\n{out}\nstderr (end):\n{err[-3000:]}")
    return proc.returncode, out, err


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_spark_pipeline_example_bills_every_order_once_and_exits_zero(tmp_path):
    code, out, err = run_example("spark_pipeline.py", tmp_path, timeout=240)
    assert code == 0, f"exit {code}\nstdout:\n{out}\nstderr (end):\n{err[-3000:]}"
    lines = out.splitlines()
    # The rewrite with the same msg_id column was deduplicated by the server.
    assert "INVOICES after write: 7 messages" in lines
    assert "INVOICES after rewrite (same msg_ids: deduplicated): 7 messages" in lines
    assert lines[-1].startswith("summary: 1000 orders, 900 billed, 7 invoices read back, total 94,329.00, "
                                "matches the plain-Python sums"), out
