# Charter: the documentation site builds with Sphinx with every warning an error (a broken link,
# a page missing from the table of contents, a malformed docstring), and its API reference covers
# every public name, with each public call's docstring rendered.
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import jetstream_sync as jss
from jetstream_sync import errors

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d",
           str(out / ".doctrees"), str(DOCS), str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("sphinx-build did not finish within 240 s")
    assert proc.returncode == 0, f"the docs build failed (warnings are errors):\n{stderr[-6000:]}\n{stdout[-2000:]}"
    return out


@pytest.mark.timeout(300)
def test_the_docs_build_with_warnings_as_errors_and_every_page_is_in_the_site(built_site):
    pages = {p.stem for p in DOCS.glob("*.md")}
    built = {p.stem for p in built_site.glob("*.html")}
    assert pages <= built, f"pages not built: {sorted(pages - built)}"
    for page in ("quickstart", "concepts", "consuming", "threading", "errors", "publishing", "spark", "server",
                 "cli", "migration", "api", "kv", "objects"):
        assert page in pages, f"docs/{page}.md is missing"


@pytest.mark.timeout(300)
def test_the_api_reference_renders_the_docstring_of_every_public_call(built_site):
    html = (built_site / "api.html").read_text()
    ids = set(re.findall(r'id="(jetstream_sync\.[\w.]+)"', html))
    for name in jss.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(jss, name)
        home = "jetstream_sync.errors" if getattr(obj, "__module__", "") == errors.__name__ else "jetstream_sync"
        assert f"{home}.{name}" in ids, f"{name} is not in the API reference"
    for call in ("Client.jetstream", "Client.close", "JetStream.publish", "JetStream.publish_async",
                 "JetStream.create_stream", "Stream.create_consumer", "Consumer.fetch", "Consumer.next",
                 "Consumer.messages", "Consumer.consume", "ConsumeHandle.drain", "ConsumeHandle.stop",
                 "Msg.ack", "Msg.double_ack", "JetStream.create_key_value", "KeyValue.get", "KeyValue.watch",
                 "KeyWatcher.initial", "JetStream.create_object_store", "ObjectStore.put", "ObjectStore.get",
                 "ObjectReader.readinto"):
        assert f"jetstream_sync.{call}" in ids, f"{call} is not documented in the API reference"
    assert "jetstream_sync.server.NatsServer" in ids
    assert "jetstream_sync.spark.publisher" in ids


def test_every_public_name_is_listed_in_the_api_page_source():
    source = (DOCS / "api.md").read_text()
    listed = set(re.findall(r"\.\. auto(?:class|function|data):: jetstream_sync\.(\w+)", source))
    public = {n for n in jss.__all__ if not n.startswith("__") and getattr(getattr(jss, n), "__module__", "")
              != errors.__name__}
    assert public - listed == set(), f"add to docs/api.md: {sorted(public - listed)}"
    assert ".. automodule:: jetstream_sync.errors" in source
