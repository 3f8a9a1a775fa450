# Charter: runs docs/notebook.ipynb top to bottom under a real ipykernel with
# nbclient: once unattended, as `jupyter nbconvert --execute` does (every cell
# finishes on its own), and once interrupting the kernel (SIGINT, as Jupyter's
# ■ button does) while a cell blocks in next() or in a messages() loop; checks
# what a notebook user sees: prompt control after the interrupt, a usable
# client, the live consume display, a key-value bucket's view, an object
# store's view, and no kernel or nats-server left behind.
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "notebook.ipynb"

# A cell tagged raises-exception prints a line with this once it is about to block;
# the driver interrupts the kernel when it sees that line on iopub.
WAITING = "interrupt the kernel"
INTERRUPT_RETURNS_WITHIN = 2.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _proc_stat(pid: int) -> tuple[str, int, str] | None:
    """(comm, ppid, state) of a live process, None when it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    state, ppid = rest.split()[:2]
    if state == "Z":
        return None
    return head.partition("(")[2], int(ppid), state


def _nats_servers_under(parent: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        info = _proc_stat(int(stat.parent.name))
        if info is not None and info[0] == "nats-server" and info[1] == parent:
            found.add(int(stat.parent.name))
    return found


class WatchingClient(NotebookClient):
    """Executes the notebook, recording every iopub message with its arrival
    time, the kernel's pid and argv and the nats-server processes the kernel started."""

    def __init__(self, nb: nbformat.NotebookNode, km: AsyncKernelManager, **kw) -> None:
        super().__init__(nb, km=km, **kw)
        self.messages: list[tuple[float, int, str, dict]] = []
        self.kernel_pid: int | None = None
        self.kernel_argv: list[str] | None = None
        self.servers: set[int] = set()
        self.servers_alive_after: dict[int, bool] = {}
        self.on_notebook_start = self._notebook_started
        self.on_cell_executed = self._cell_executed

    def _notebook_started(self, notebook) -> None:
        self.kernel_pid = self.km.provisioner.pid
        cmdline = Path(f"/proc/{self.kernel_pid}/cmdline")
        if cmdline.exists():
            self.kernel_argv = cmdline.read_bytes().decode().split("\0")

    def _cell_executed(self, cell, cell_index, execute_reply) -> None:
        if self.kernel_pid is not None and Path("/proc").is_dir():
            self.servers |= _nats_servers_under(self.kernel_pid)
            self.servers_alive_after[cell_index] = all(_proc_stat(pid) for pid in self.servers)

    def process_message(self, msg, cell, cell_index):
        self.messages.append((time.monotonic(), cell_index, msg["msg_type"], msg["content"]))
        return super().process_message(msg, cell, cell_index)

    def first(self, cell_index: int, msg_type: str) -> tuple[float, dict]:
        for when, index, kind, content in self.messages:
            if index == cell_index and kind == msg_type:
                return when, content
        raise AssertionError(f"no {msg_type} message from cell {cell_index}")


class InterruptingClient(WatchingClient):
    """A WatchingClient that interrupts the kernel once a ``raises-exception``
    cell says it waits, recording when each interrupt was sent."""

    def __init__(self, nb: nbformat.NotebookNode, km: AsyncKernelManager, **kw) -> None:
        super().__init__(nb, km, **kw)
        self.interrupted_at: dict[int, float] = {}
        self._tasks: set[asyncio.Future] = set()

    def process_message(self, msg, cell, cell_index):
        now = time.monotonic()
        if (msg["msg_type"] == "stream" and WAITING in msg["content"].get("text", "")
                and "raises-exception" in cell.metadata.get("tags", [])
                and cell_index not in self.interrupted_at):
            self.interrupted_at[cell_index] = now
            # The real thing: KernelManager.interrupt_kernel() signals the kernel with SIGINT.
            task = asyncio.ensure_future(self.km.interrupt_kernel())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return super().process_message(msg, cell, cell_index)


def _kernel_manager(tmp_path: Path) -> AsyncKernelManager:
    """A manager for kernel "python3" that runs this very interpreter.

    The kernelspec lives in a directory of the test's own, so a python3 spec
    installed for the user or system (maybe another interpreter) cannot win.
    """
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (test interpreter)",
        "language": "python",
        "interrupt_mode": "signal",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    assert ksm.get_kernel_spec("python3").argv[0] == sys.executable
    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=ksm,
                              connection_file=str(tmp_path / "connection.json"))


def _code_cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    return [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def _text(cell: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def test_the_notebook_is_stored_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = _code_cells(nb)
    assert code, "the notebook has no code cells"
    for i, cell in code:
        assert cell.outputs == [], f"cell {i} has stored outputs"
        assert cell.execution_count is None, f"cell {i} has an execution count"
    interrupted = [i for i, cell in code if "raises-exception" in cell.metadata.get("tags", [])]
    assert len(interrupted) == 2
    for i in interrupted:
        assert WAITING in nb.cells[i].source
    # Every step is introduced by a markdown cell.
    for i, _ in code:
        assert any(c.cell_type == "markdown" for c in nb.cells[max(0, i - 2):i]), f"cell {i} has no intro"


def _execute(client: WatchingClient, tmp_path: Path) -> tuple[Exception | None, set[int]]:
    """Run the notebook, the kernel shut down at the end or on failure; return what failed (a cell's
    error, a cell over its timeout, a dead kernel) and the nats-servers left running, killed."""
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"))
    env.pop("NATS_URL", None)  # the notebook starts its own server
    failure: Exception | None = None
    try:
        client.execute(cleanup_kc=True, env=env)
    except Exception as exc:  # raised by the caller once nothing is left running
        failure = exc
    finally:
        leftovers = {pid for pid in client.servers if _proc_stat(pid)}
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return failure, leftovers


def _assert_nothing_left(client: WatchingClient, km: AsyncKernelManager, leftovers: set[int]) -> None:
    """The kernel ran this interpreter and is gone; it left no nats-server behind."""
    assert client.kernel_pid is not None
    if client.kernel_argv is not None:
        assert client.kernel_argv[:3] == [sys.executable, "-m", "ipykernel_launcher"]
    assert not km.has_kernel
    assert _proc_stat(client.kernel_pid) is None, "the kernel process is still running"
    assert len(client.servers) == 1, f"expected the notebook's one nats-server, saw {client.servers}"
    assert not leftovers, f"nats-server processes left running by the notebook: {leftovers}"


def _client(cls: type[WatchingClient], nb: nbformat.NotebookNode, km: AsyncKernelManager,
            tmp_path: Path) -> WatchingClient:
    return cls(nb, km,
               timeout=60,  # per cell: the waiting cells give up after 10 s, or are interrupted before
               startup_timeout=60,
               kernel_name="python3",
               resources={"metadata": {"path": str(tmp_path)}})


@pytest.mark.timeout(180)
def test_the_notebook_runs_unattended_as_nbconvert_execute_does(tmp_path):
    # Nobody presses the interrupt button: every cell ends on its own, without an error.
    nb = nbformat.read(NOTEBOOK, as_version=4)
    km = _kernel_manager(tmp_path)
    client = _client(WatchingClient, nb, km, tmp_path)
    failure, leftovers = _execute(client, tmp_path)
    if failure is not None:
        raise failure
    _assert_nothing_left(client, km, leftovers)

    code = _code_cells(nb)
    for i, cell in code:
        assert [out for out in cell.outputs if out.output_type == "error"] == [], f"cell {i}: {cell.outputs}"
        assert not [out for out in cell.outputs if out.get("name") == "stderr"], cell.outputs
    texts = {i: _text(cell) for i, cell in code}
    waiting = [i for i, cell in code if "raises-exception" in cell.metadata.get("tags", [])]
    following = {i: next(j for j, _ in code if j > i) for i in waiting}
    assert "no message in 10 s: next() raised jss.TimeoutError" in texts[waiting[0]]
    assert "b'still alive' in" in texts[following[waiting[0]]]
    assert "update 4\n" in texts[waiting[1]] and "nothing more in 10 s" in texts[waiting[1]]
    assert "received: 5" in texts[following[waiting[1]]]
    assert "left in the stopped iterator: []" in texts[following[waiting[1]]]
    assert "b'one more' in" in texts[following[waiting[1]]]

    # The key-value cells: the bucket shows its keys and values; a watcher's snapshot, then a live change.
    bucket = next(cell for _, cell in code if "create_key_value" in cell.source)
    view = [out.data["text/html"] for out in bucket.outputs if out.output_type == "execute_result"]
    assert len(view) == 1 and "<strong>Key-value bucket</strong>" in view[0], bucket.outputs
    for key, value in (("theme", "dark"), ("language", "en"), ("page.size", "100")):
        assert f">{key}</th>" in view[0] and f">{value}</td>" in view[0], view[0]
    watch = next(i for i, cell in code if "kv.watch()" in cell.source)
    assert texts[watch].splitlines() == ["theme = dark (revision 1)", "language = en (revision 2)",
                                         "page.size = 100 (revision 4)", "caught up: True",
                                         "changed: theme = light (revision 5)"], texts[watch]

    # The object store cells: the store shows its objects and sizes; a reader's bytes, then the object's info.
    store = next(i for i, cell in code if "create_object_store" in cell.source)
    assert texts[store] == "weights.bin: 1048576 bytes in 8 chunks\n", texts[store]
    view = [out.data["text/html"] for out in nb.cells[store].outputs if out.output_type == "execute_result"]
    assert len(view) == 1 and "<strong>Object store</strong>" in view[0], nb.cells[store].outputs
    for name, size in (("notes.txt", "21 B"), ("weights.bin", "1.0 MiB")):
        assert f">{name}</th>" in view[0] and size in view[0], view[0]
    read = next(i for i, cell in code if "readinto" in cell.source)
    assert texts[read] == "read 1048576 bytes of 1048576, digest checked\n", texts[read]
    shown = [out.data["text/html"] for out in nb.cells[read].outputs if out.output_type == "execute_result"]
    assert len(shown) == 1 and "<strong>Object</strong> <code>weights.bin</code>" in shown[0], nb.cells[read].outputs
    assert "SHA-256=" in shown[0] and ">8</td>" in shown[0], shown[0]


@pytest.mark.timeout(180)
def test_the_notebook_runs_under_a_real_kernel_and_survives_interrupts(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    km = _kernel_manager(tmp_path)
    client = _client(InterruptingClient, nb, km, tmp_path)
    failure, leftovers = _execute(client, tmp_path)
    if failure is not None:
        died = [i for i, alive in client.servers_alive_after.items() if not alive and i in client.interrupted_at]
        if died:
            pytest.fail(
                f"the kernel interrupt in cell {died[0]} also killed the notebook's nats-server: Jupyter "
                "sends SIGINT to the kernel's whole process group, so NatsServer must start the server in "
                f"a process group of its own.\n{failure}", pytrace=False)
        raise failure
    _assert_nothing_left(client, km, leftovers)

    code = _code_cells(nb)
    interrupted = [i for i, cell in code if "raises-exception" in cell.metadata.get("tags", [])]
    assert sorted(client.interrupted_at) == interrupted, "a cell was not interrupted after saying it waits"

    for i, cell in code:
        errors = [out for out in cell.outputs if out.output_type == "error"]
        if i in interrupted:
            # Control came back promptly, with a KeyboardInterrupt raised inside the blocking call.
            assert [e.ename for e in errors] == ["KeyboardInterrupt"], cell.outputs
            traceback = ANSI.sub("", "\n".join(errors[0].traceback))
            assert "jetstream_sync" in traceback, traceback
            error_at, _ = client.first(i, "error")
            assert error_at - client.interrupted_at[i] < INTERRUPT_RETURNS_WITHIN
            assert client.servers_alive_after[i], f"the interrupt of cell {i} killed the nats-server"
        else:
            assert errors == [], f"cell {i} failed: {cell.outputs}"
            assert not [out for out in cell.outputs if out.get("name") == "stderr"], cell.outputs

    texts = {i: _text(cell) for i, cell in code}
    assert any("asyncio loop running in this thread: True" in t for t in texts.values())
    following = {i: next(j for j, _ in code if j > i) for i in interrupted}
    after_next, after_messages = following[interrupted[0]], following[interrupted[1]]
    assert "b'still alive' in" in texts[after_next]
    assert "left in the stopped iterator: []" in texts[after_messages]
    assert "b'one more' in" in texts[after_messages]

    # Rich displays: StreamInfo, PubAck and ConsumeStats came out as HTML tables.
    html = [out.data["text/html"] for _, cell in code for out in cell.outputs
            if out.output_type in ("display_data", "execute_result") and "text/html" in out.get("data", {})]
    for kind in ("<strong>StreamInfo</strong>", "<strong>PubAck</strong>", "<strong>ConsumerInfo</strong>",
                 "<strong>ConsumeStats</strong>", "<strong>Key-value bucket</strong>", "<strong>Object store</strong>",
                 "<strong>Object</strong>"):
        assert any(kind in h for h in html), f"no {kind} display"

    # The live display: shown while running, updated in place, stored with its final state.
    shown = [(when, c) for when, _, kind, c in client.messages
             if kind == "display_data" and "ConsumeHandle" in c["data"].get("text/html", "")]
    updates = [(when, c) for when, _, kind, c in client.messages
               if kind == "update_display_data" and "ConsumeHandle" in c["data"].get("text/html", "")]
    assert len(shown) == 1 and len(updates) >= 2
    display_id = shown[0][1]["transient"]["display_id"]
    assert all(c["transient"]["display_id"] == display_id for _, c in updates)
    assert ">running</span>" in shown[0][1]["data"]["text/html"]
    assert ">stopped</span>" in updates[-1][1]["data"]["text/html"]
    stored = [out for _, cell in code for out in cell.outputs
              if out.output_type == "display_data" and "ConsumeHandle" in out.data.get("text/html", "")]
    assert len(stored) == 1
    assert stored[0].data["text/html"] == updates[-1][1]["data"]["text/html"]
    assert ">190</td>" in stored[0].data["text/html"]
