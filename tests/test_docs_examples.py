# Charter: every code example in README.md and docs/*.md runs, so a broken example fails CI.
# A page's ```python blocks run in order as one script in a fresh interpreter (state carries over),
# its ```console lines ("$ command") run with bash at their place in that order, against a fresh
# nats-server given in $NATS_URL. ```sh blocks are install instructions (CI runs those itself).
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from jetstream_sync.server import NatsServer

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python", "py", "console"}
NOT_RUN = {"sh", "bash", "shell", "text", "json", "ini", "toml", "yaml", "cfg", ""}
EXIT_MARK = re.compile(r"#\s*exit\s+(\d+)\s*$")


@attrs.frozen
class Block:
    """One fenced example: ``kind`` is "python" or "console"; ``line`` is its first code line (1-based)."""

    kind: str
    line: int
    code: str


def extract_blocks(text: str, name: str) -> list[Block]:
    """The runnable blocks of a Markdown page, in page order. Raises ValueError on what cannot be run."""
    if "<!-- not run -->" in text:
        raise ValueError(f"{name}: has a '<!-- not run -->' marker; every example must run")
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i + 1
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{name}:{start}: a code fence is never closed")
        i += 1
        if info.startswith("{"):          # a MyST directive (toctree, eval-rst, ...), not an example
            continue
        kind = "python" if info in ("python", "py") else info
        if kind in RUN:
            blocks.append(Block(kind, start + 1, "\n".join(body) + "\n"))
        elif kind not in NOT_RUN:
            raise ValueError(f"{name}:{start}: unknown code fence language {info!r}; "
                             f"use python or console (run) or one of {sorted(NOT_RUN - {''})} (not run)")
    return blocks


def console_commands(block: Block) -> list[tuple[int, str, int]]:
    """``(line, command, expected exit code)`` for each ``$ `` line; a trailing backslash continues."""
    out: list[tuple[int, str, int]] = []
    lines = block.code.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        line_no, cmd = block.line + i, lines[i][2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        m = EXIT_MARK.search(cmd)
        out.append((line_no, cmd, int(m.group(1)) if m else 0))
        i += 1
    return out


# The page runs in this driver: each python block is compiled under the page's own file name and line
# numbers (so a traceback points into the Markdown) and executed in the driver's globals, which makes it
# the __main__ module, as a user's script would be.
DRIVER = r'''
import json as _json, subprocess as _subprocess, sys as _sys
_steps = _json.load(open(_sys.argv[1]))
for _step in _steps:
    if _step["kind"] == "python":
        exec(compile("\n" * (_step["line"] - 1) + _step["code"], _step["file"], "exec"), globals())
        continue
    _line, _cmd, _want = _step["line"], _step["cmd"], _step["exit"]
    _sys.stdout.flush()
    _proc = _subprocess.run(["bash", "-c", _cmd], capture_output=True, text=True, timeout=120)
    _sys.stdout.write(f"$ {_cmd}\n{_proc.stdout}")
    _sys.stderr.write(_proc.stderr)
    if _proc.returncode != _want:
        raise SystemExit(f"{_step['file']}:{_line}: `{_cmd}` exited {_proc.returncode}, expected {_want}\n"
                         f"stdout:\n{_proc.stdout}\nstderr:\n{_proc.stderr}")
'''


def page_steps(page: Path) -> list[dict]:
    name = str(page.relative_to(ROOT))
    steps: list[dict] = []
    for block in extract_blocks(page.read_text(), name):
        if block.kind == "python":
            steps.append({"kind": "python", "file": name, "line": block.line, "code": block.code})
        else:
            steps.extend({"kind": "console", "file": name, "line": line, "cmd": cmd, "exit": want}
                         for line, cmd, want in console_commands(block))
    return steps


def uses_spark(page: Path) -> bool:
    try:
        steps = page_steps(page)
    except ValueError:                 # reported by the page's own test, not at collection
        return False
    return any(s["kind"] == "python" and "pyspark" in s["code"] for s in steps)


def run_page(page: Path, tmp_path: Path, timeout: float) -> subprocess.CompletedProcess:
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps(page_steps(page)))
    driver = tmp_path / "run_page.py"
    driver.write_text(DRIVER)
    with NatsServer() as server:
        env = dict(os.environ, NATS_URL=server.url, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        proc = subprocess.Popen([sys.executable, str(driver), str(steps)], cwd=tmp_path, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"{page.name} did not finish within {timeout:.0f} s\nstdout:\n{out[-3000:]}\n"
                        f"stderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _page_param(page: Path):
    marks = [pytest.mark.spark, pytest.mark.timeout(420)] if uses_spark(page) else [pytest.mark.timeout(330)]
    return pytest.param(page, id=str(page.relative_to(ROOT)), marks=marks)


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES])
def test_every_example_on_the_page_runs_against_a_real_server(page, tmp_path):
    # The command-line page starts the console script some forty times: a loaded machine needs minutes.
    timeout = 360 if uses_spark(page) else 300
    proc = run_page(page, tmp_path, timeout)
    assert proc.returncode == 0, (f"{page.relative_to(ROOT)} failed (exit {proc.returncode})\n"
                                  f"stdout (end):\n{proc.stdout[-3000:]}\nstderr (end):\n{proc.stderr[-5000:]}")


def test_the_readme_and_every_docs_page_with_code_have_runnable_examples():
    runnable = {p.relative_to(ROOT).as_posix() for p in PAGES if "```python" in p.read_text()}
    assert "README.md" in runnable
    for page in ("quickstart", "consuming", "threading", "errors", "server", "spark", "kv", "objects"):
        assert f"docs/{page}.md" in runnable


# --- the extractor itself -------------------------------------------------------------------------------

SAMPLE = """\
# Title

```sh
pip install jetstream-sync
```

```python
x = 1
```

- a list item with an indented example:

  ```python
  y = x + 1
  ```

```console
$ jetstream-sync stream ls
NAME  MESSAGES
$ jetstream-sync stream info NOPE   # exit 3
$ jetstream-sync pub ORDERS.new \\
    hello
```

```{toctree}
index
```
"""


def test_the_extractor_returns_python_and_console_blocks_in_page_order_with_their_lines():
    blocks = extract_blocks(SAMPLE, "sample.md")
    assert [(b.kind, b.line) for b in blocks] == [("python", 8), ("python", 14), ("console", 18)]
    assert blocks[1].code == "y = x + 1\n"
    assert console_commands(blocks[2]) == [
        (18, "jetstream-sync stream ls", 0),
        (20, "jetstream-sync stream info NOPE   # exit 3", 3),
        (21, "jetstream-sync pub ORDERS.new  hello", 0),
    ]


@pytest.mark.parametrize("text, match", [
    ("<!-- not run -->\n```python\nx\n```\n", "not run"),
    ("```python\nx = 1\n", "never closed"),
    ("```pyhton\nx = 1\n```\n", "unknown code fence language 'pyhton'"),
])
def test_the_extractor_refuses_pages_whose_examples_would_not_run(text, match):
    with pytest.raises(ValueError, match=match):
        extract_blocks(text, "bad.md")
