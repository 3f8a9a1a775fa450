# The package's layers hold: the import-linter contracts of setup.cfg are kept (the core runs one
# way, only _connection imports nats-py, the embedded server stands alone), no package module imports
# another inside a function to dodge a cycle (only optional dependencies load late), and no
# jetstream_sync module imports another at run time in a circle. CONTRIBUTING.md names the layers.
from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil
import subprocess
import sys

import pytest

import jetstream_sync

ROOT = pathlib.Path(jetstream_sync.__file__).parent
SETUP_CFG = ROOT.parent / "setup.cfg"

#: What may be imported inside a function: optional dependencies, or a module that pulls one in
#: (the HTML views, pyspark, pyarrow and pandas, the Spark data source, tqdm's notebook-aware bar).
LATE_IMPORTS_ALLOWED = {"_html", "pyspark", "pyarrow", "pandas", "datasource", "tqdm"}
#: The command line also loads the client (nats-py, asyncio), the embedded server, attrs, ssl, the name
#: rules (_codec: bucket names and keys checked while parsing) and the range reader (ranges, for `stream
#: export`) only in the commands that use them, so `--help` and a usage error start fast. It is the top
#: layer: nothing imports it, so a late import there cannot hide a cycle.
CLI_LATE_IMPORTS_ALLOWED = {"client", "server", "attrs", "ssl", "_codec", "ranges"}


@pytest.mark.timeout(120)
def test_the_import_linter_contracts_are_kept():
    # In a child process: import-linter configures logging with dictConfig, which would disable this
    # process's loggers for every later test.
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
         f"sys.exit(lint_imports(config_filename={str(SETUP_CFG)!r}, no_cache=True, no_logo=True))"],
        capture_output=True, text=True, timeout=100, cwd=ROOT.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout and "3 kept" in proc.stdout


def _late_imports() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        allowed = LATE_IMPORTS_ALLOWED | (CLI_LATE_IMPORTS_ALLOWED if path.parent.name == "cli" else set())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [(a.name, a.name.split(".")[0]) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module is None:  # from . import _html
                    names = [(a.name, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):  # relative: the module's own name; absolute: the package
                    key = node.module.split(".")[-1] if node.level else node.module.split(".")[0]
                    names = [(node.module, key)]
                else:
                    continue
                found += [f"{path.relative_to(ROOT.parent)}:{node.lineno} imports {name}"
                          for name, key in names if key not in allowed]
    return found


def test_no_module_imports_inside_a_function_except_optional_dependencies():
    assert _late_imports() == []


def _runtime_imports(module: str) -> set[str]:
    """The jetstream_sync modules ``module`` imports when it runs (not for type checkers)."""
    path = pathlib.Path(importlib.util.find_spec(module).origin)
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in tree.body:  # module level only: TYPE_CHECKING blocks are `if` statements, skipped
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                candidates = [f"{base}.{node.module}"] if node.module else [f"{base}.{a.name}" for a in node.names]
            else:
                candidates = [node.module or ""]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        out.update(name for name in candidates if name.startswith("jetstream_sync."))
    out.discard(module)
    return out


def test_no_jetstream_sync_modules_import_each_other_in_a_circle():
    modules = [m.name for m in pkgutil.walk_packages(jetstream_sync.__path__, "jetstream_sync.")]
    graph = {m: _runtime_imports(m) & set(modules) for m in modules}
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            pytest.fail("import cycle: " + " -> ".join(path[path.index(node):] + [node]))
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, path + [node])
        done.add(node)

    for m in modules:
        visit(m, [])
    # The lowest layers really are below everything: nothing of ours above them.
    assert graph["jetstream_sync._protocol"] <= {"jetstream_sync.errors", "jetstream_sync._headers"}
    below_client = {m for m in modules if m != "jetstream_sync.client" and not m.startswith(
        ("jetstream_sync.cli", "jetstream_sync.spark", "jetstream_sync.__main__"))}
    assert not any("jetstream_sync.client" in graph[m] for m in below_client)


#: What a bare ``import jetstream_sync`` must not load: the client's dependencies load with the first use
#: of a name that needs them (``jss.connect``, ``jss.StreamConfig``), so a script or the command line
#: that needs less starts faster.
HEAVY = ("nats", "asyncio", "attrs", "tenacity", "tqdm", "ssl", "jetstream_sync.client", "jetstream_sync._connection")


def _loaded_after(code: str) -> set[str]:
    """The top-level names in ``HEAVY`` that a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          cwd=ROOT.parent)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split()) & set(HEAVY)


@pytest.mark.timeout(120)
def test_importing_the_package_loads_neither_nats_nor_the_client_until_a_name_needs_them():
    assert _loaded_after("import jetstream_sync") == set()
    assert _loaded_after("import jetstream_sync as jss\njss.TimeoutError, jss.APIError, jss.__version__") == set()
    assert {"nats", "jetstream_sync.client"} <= _loaded_after("import jetstream_sync as jss\njss.connect")
    assert {"attrs"} <= _loaded_after("from jetstream_sync import StreamConfig")
