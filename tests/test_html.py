# Charter: the notebook displays (_repr_html_) of StreamInfo, ConsumerInfo,
# PubAck, ConsumeStats and ConsumeHandle, built from real objects a server
# returned: they show the figures that matter, escape whatever the server or
# a user wrote, and render snapshots without any I/O.
from __future__ import annotations

import subprocess
import sys
import threading
from html.parser import HTMLParser

import pytest

import jetstream_sync as jss
from jetstream_sync import _html

from conftest import wait_for

# Everything the renderers emit; a <script>, <img> or <b> means something was not escaped.
OUR_TAGS = {"div", "strong", "code", "span", "table", "thead", "tbody", "tr", "th", "td"}


class Rendered(HTMLParser):
    """Reads our HTML back: the title, the tags used, and the table cells as text."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.cells: list[tuple[str, str]] = []
        self.state: str | None = None
        self.error: str | None = None
        self._title: list[str] = []
        self._in: str | None = None
        self._cell: list[str] | None = None
        self._error: list[str] | None = None
        self.feed(markup)
        self.close()
        self.title = "".join(self._title).strip()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.add(tag)
        attrs_ = dict(attrs)
        if tag in ("th", "td"):
            self._cell = [tag, ""]
        elif tag in ("strong", "code") and not self.cells:
            self._in = "title"
        elif tag == "span" and attrs_.get("class") == "jetstream-sync-state":
            self._in = "state"
            self.state = ""
        elif tag == "div" and "color" in (attrs_.get("style") or ""):
            self._error = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            self.cells.append((self._cell[0], self._cell[1]))
            self._cell = None
        elif tag == "div" and self._error is not None:
            self.error = "".join(self._error)
            self._error = None
        self._in = None if tag in ("strong", "code", "span") else self._in

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[1] += data
        elif self._error is not None:
            self._error.append(data)
        elif self._in == "title":
            self._title.append(data + " ")
        elif self._in == "state":
            self.state = (self.state or "") + data

    def rows(self) -> dict[str, str]:
        """A key/value table as {label: value}."""
        out = {}
        for (tag, label), (tag2, value) in zip(self.cells, self.cells[1:]):
            if tag == "th" and tag2 == "td":
                out[label] = value
        return out

    def counters(self) -> dict[str, str]:
        """A counters table (labels in the header row) as {label: value}."""
        heads = [text for tag, text in self.cells if tag == "th"]
        values = [text for tag, text in self.cells if tag == "td"]
        assert len(heads) == len(values)
        return dict(zip(heads, values))


def rendered(obj) -> Rendered:
    markup = obj._repr_html_()
    assert isinstance(markup, str)
    page = Rendered(markup)
    assert page.tags <= OUR_TAGS, f"unexpected tags {page.tags - OUR_TAGS} in {markup}"
    return page


def stats_as_text(stats: jss.ConsumeStats) -> dict[str, str]:
    return {
        "received": f"{stats.received:,}",
        "handled": f"{stats.handled:,}",
        "handler_errors": f"{stats.handler_errors:,}",
        "pulls": f"{stats.pulls:,}",
        "buffered": f"{stats.buffered:,}",
        "warnings": f"{stats.warnings:,}",
    }


@pytest.mark.timeout(30)
def test_stream_info_shows_name_subjects_storage_and_counters(js):
    stream = js.create_stream(name="HTML_STREAM", subjects=["html.stream.*"], storage="memory", num_replicas=1)
    for _ in range(3):
        js.publish("html.stream.a", b"x" * 10)
    stream.create_consumer(durable_name="one")
    info = stream.info()

    page = rendered(info)

    assert page.title == "StreamInfo HTML_STREAM"
    rows = page.rows()
    assert rows["subjects"] == "html.stream.*"
    assert rows["storage"] == "memory"
    assert rows["replicas"] == "1"
    assert rows["messages"] == "3"
    assert rows["bytes"] == f"{info.state.bytes} B"
    assert rows["first seq"] == "1"
    assert rows["last seq"] == "3"
    assert rows["consumers"] == "1"
    assert rows["created"] == info.created.isoformat(sep=" ", timespec="seconds")


@pytest.mark.timeout(30)
def test_consumer_info_shows_filter_ack_policy_and_delivery_progress(js):
    stream = js.create_stream(name="HTML_CONSUMER", subjects=["html.consumer.*"], storage="memory")
    for _ in range(5):
        js.publish("html.consumer.a", b"x")
    js.publish("html.consumer.other", b"x")
    consumer = stream.create_consumer(durable_name="progress", filter_subject="html.consumer.a",
                                      ack_policy="explicit")
    msgs = list(consumer.fetch(3, expires=5.0))
    assert len(msgs) == 3
    msgs[0].double_ack()
    msgs[1].double_ack()
    info = consumer.info()

    page = rendered(info)

    assert page.title == "ConsumerInfo progress"
    rows = page.rows()
    assert rows["stream"] == "HTML_CONSUMER"
    assert rows["filter"] == "html.consumer.a"
    assert rows["ack policy"] == "explicit"
    assert rows["delivered"] == "consumer 3 / stream 3"
    assert rows["ack floor"] == "consumer 2 / stream 2"
    assert rows["num_pending"] == "2"
    assert rows["num_ack_pending"] == "1"
    assert rows["num_redelivered"] == "0"
    assert rows["num_waiting"] == str(info.num_waiting)
    msgs[2].ack()


@pytest.mark.timeout(30)
def test_pub_ack_shows_stream_sequence_and_whether_it_was_a_duplicate(js):
    js.create_stream(name="HTML_ACK", subjects=["html.ack"], storage="memory")
    first = js.publish("html.ack", b"1", msg_id="once")
    again = js.publish("html.ack", b"1", msg_id="once")

    assert rendered(first).rows() == {"stream": "HTML_ACK", "seq": "1", "duplicate": "no"}
    assert rendered(again).rows() == {"stream": "HTML_ACK", "seq": "1", "duplicate": "yes"}
    assert rendered(first).title == "PubAck"


@pytest.mark.timeout(30)
def test_names_descriptions_and_subjects_from_the_server_are_escaped(js):
    # Stream and consumer names may hold '<', '&' and quotes (not '>'); descriptions anything.
    name = 'H<img&"x\''
    subject = "hostile.<img&x"
    script = '<script>alert("pwned")</script>'
    image = "<img src=x onerror=alert(1)>"
    stream = js.create_stream(name=name, subjects=[subject], description=script, storage="memory")
    ack = js.publish(subject, b"x")
    consumer = stream.create_consumer(durable_name="c<b&", description=image, filter_subject=subject)

    stream_page = rendered(stream.info())
    consumer_page = rendered(consumer.info())
    ack_page = rendered(ack)

    # Nothing but our own tags came out, and every hostile string reads back as plain text.
    assert stream_page.title == f"StreamInfo {name}"
    assert stream_page.rows()["description"] == script
    assert stream_page.rows()["subjects"] == subject
    assert consumer_page.title == "ConsumerInfo c<b&"
    assert consumer_page.rows()["description"] == image
    assert consumer_page.rows()["filter"] == subject
    assert consumer_page.rows()["stream"] == name
    assert ack_page.rows()["stream"] == name
    for markup in (stream.info()._repr_html_(), consumer.info()._repr_html_(), ack._repr_html_()):
        assert "<script" not in markup and "<img" not in markup and "<b&" not in markup


@pytest.mark.timeout(30)
def test_consume_handle_shows_running_draining_and_stopped_with_live_counters(js):
    stream = js.create_stream(name="HTML_HANDLE", subjects=["html.handle"], storage="memory")
    for i in range(20):
        js.publish_async("html.handle", f"{i}")
    js.publish_async_complete()
    consumer = stream.create_consumer(durable_name="live")
    seen = []
    blocking = threading.Event()
    release = threading.Event()

    def handler(msg):
        seen.append(msg)
        if len(seen) == 11:  # hold the 11th message until the test has looked
            blocking.set()
            release.wait(10)
        msg.ack()

    handle = consumer.consume(handler)
    try:
        assert blocking.wait(10)
        running = rendered(handle)
        assert running.title == "ConsumeHandle"
        assert running.state == "running"
        counters = running.counters()
        assert counters["handled"] == "10"
        assert int(counters["received"]) >= 11
        assert counters["handler_errors"] == "0"

        handle.drain()  # the worker is still inside the 11th message
        assert rendered(handle).state == "draining"
    finally:
        release.set()
    assert handle.wait(10)
    stopped = rendered(handle)
    assert stopped.state == "stopped"
    assert stopped.counters() == stats_as_text(handle.stats)
    assert stopped.counters()["handled"] == "20"
    assert stopped.error is None

    stats_page = rendered(handle.stats)
    assert stats_page.title == "ConsumeStats"
    assert stats_page.counters() == stats_as_text(handle.stats)


@pytest.mark.timeout(30)
def test_consume_handle_shows_stopped_after_stop_and_error_with_its_message(js):
    stream = js.create_stream(name="HTML_STATES", subjects=["html.states"], storage="memory")
    js.publish("html.states", b"x")
    first = stream.create_consumer(durable_name="first")
    handle = first.consume(lambda msg: msg.ack())
    wait_for(lambda: handle.stats.handled == 1, what="the message to be handled")
    handle.stop()
    assert rendered(handle).state == "stopped"

    doomed = stream.create_consumer(durable_name="doomed")
    errors_seen = []
    handle = doomed.consume(lambda msg: msg.ack(), error_handler=errors_seen.append)
    wait_for(lambda: handle.stats.handled == 1, what="the message to be handled")
    doomed.delete()
    assert handle.wait(10)
    page = rendered(handle)
    assert page.state == "error"
    assert isinstance(handle.error, jss.ConsumerDeletedError)
    assert page.error == f"ConsumerDeletedError: {handle.error}"


@pytest.mark.timeout(30)
def test_snapshots_render_after_the_client_is_closed_so_they_do_no_io(nats_server):
    client = jss.connect(nats_server.url, name="html-no-io")
    try:
        js = client.jetstream()
        stream = js.create_stream(name="HTML_NO_IO", subjects=["html.noio"], storage="memory")
        ack = js.publish("html.noio", b"x")
        consumer = stream.create_consumer(durable_name="snap")
        handle = consumer.consume(lambda msg: msg.ack())
        wait_for(lambda: handle.stats.handled == 1, what="the message to be handled")
        handle.stop()
        stream_info, consumer_info = stream.info(), consumer.info()
        js.delete_stream("HTML_NO_IO")
    finally:
        client.close()
    with pytest.raises(jss.ClientClosedError):
        stream.info()  # any I/O now raises
    assert rendered(stream_info).rows()["messages"] == "1"
    assert rendered(consumer_info).rows()["num_pending"] == "0"
    assert rendered(ack).rows()["seq"] == "1"
    assert rendered(handle).counters()["handled"] == "1"
    assert rendered(handle.stats).counters()["handled"] == "1"


@pytest.mark.timeout(30)
def test_rendering_a_running_consume_handle_only_reads_its_counters(js, api_spy):
    stream = js.create_stream(name="HTML_READS", subjects=["html.reads"], storage="memory")
    for _ in range(5):
        js.publish("html.reads", b"x")
    consumer = stream.create_consumer(durable_name="reads")
    handle = consumer.consume(lambda msg: msg.ack())
    try:
        wait_for(lambda: handle.stats.handled == 5, what="5 messages handled")
        pulls = handle.stats.pulls
        mark = api_spy.mark(js)
        pages = [rendered(handle) for _ in range(100)]
        sentinel = api_spy.sync(js)
        assert api_spy.since(mark) == [sentinel], "rendering the handle sent requests"
        assert handle.stats.pulls == pulls
        assert {page.state for page in pages} == {"running"}
    finally:
        handle.stop()


def test_numbers_sizes_and_times_are_formatted_for_reading():
    from datetime import datetime, timezone

    assert _html.fmt(1234567) == "1,234,567"
    assert _html.fmt(None) == "\u2014"
    assert _html.fmt(True) == "yes"
    assert _html.fmt(["a.>", "b.*"]) == "a.>, b.*"
    assert _html.fmt(jss.StorageType.MEMORY) == "memory"
    assert _html.fmt(datetime(2024, 6, 7, 12, 30, 5, 123, tzinfo=timezone.utc)) == "2024-06-07 12:30:05+00:00"
    assert _html.size(512) == "512 B"
    assert _html.size(1536) == "1.5 KiB (1,536)"
    assert _html.size(3 * 1024**3) == "3.0 GiB (3,221,225,472)"


def test_a_hostile_error_message_is_escaped_in_the_handle_display():
    markup = _html.consume_handle("error", jss.ConsumeStats(), ValueError("<script>alert(1)</script>"))
    page = Rendered(markup)
    assert page.tags <= OUR_TAGS
    assert page.error == "ValueError: <script>alert(1)</script>"
    assert page.state == "error"


@pytest.mark.timeout(60)
def test_importing_and_rendering_does_not_import_ipython():
    code = (
        "import sys\n"
        "import jetstream_sync as jss\n"
        "from jetstream_sync import _html\n"
        "assert jss.PubAck(stream='S', seq=1)._repr_html_()\n"
        "assert jss.ConsumeStats()._repr_html_()\n"
        "assert 'IPython' not in sys.modules, 'IPython was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert result.returncode == 0, result.stderr
