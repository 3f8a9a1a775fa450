# Charter: `jetstream-sync pub` through the real console script: one message and --count N with
# {count} placeholders (distinct msg ids, deduplicated on a rerun), headers, stdin, publish
# expectations refused by the server (exit 1), and the progress bar on stderr.
from __future__ import annotations

import re
import signal
import subprocess

import pytest

from conftest import wait_for
from test_cli import CLI, as_json, cli, cli_env, fails, ok

pytestmark = pytest.mark.timeout(60)


def test_pub_stores_one_message_with_headers(js, nats_server):
    js.create_stream(name="CLI_PUB", subjects=["cli.pub.*"], storage="memory")
    out = ok(cli("pub", "cli.pub.one", "hello", "-H", "X-A:1", "-H", "X-A: 2", "--header", "X-B:b",
                 server=nats_server))
    assert out == "published 1 message to cli.pub.one: stream CLI_PUB seq 1\n"
    msg = js.stream("CLI_PUB").get_msg(1)
    assert (msg.subject, msg.data) == ("cli.pub.one", b"hello")
    assert msg.headers.get_all("X-A") == ["1", "2"] and msg.headers["X-B"] == "b"
    ok(cli("pub", "cli.pub.stdin", "--stdin", input="from stdin\n", server=nats_server))
    assert js.stream("CLI_PUB").get_msg(2).data == b"from stdin\n"


def test_pub_count_fills_in_the_count_placeholder_and_a_rerun_is_deduplicated(js, nats_server):
    js.create_stream(name="CLI_PUBN", subjects=["cli.pubn"], storage="memory", duplicate_window=60.0)
    args = ("pub", "cli.pubn", '{"id": {count}}', "--count", "100", "--msg-id", "order-{count}",
            "-H", "X-N:{count}")
    out = ok(cli(*args, server=nats_server))
    assert out.startswith("published 100 messages to cli.pubn in ")
    assert out.rstrip().endswith("msgs/s), last seq 100")
    stream = js.stream("CLI_PUBN")
    m = stream.get_msg(42)
    assert (m.data, m.headers["Nats-Msg-Id"], m.headers["X-N"]) == (b'{"id": 42}', "order-42", "42")
    again = as_json(cli(*args, "--json", server=nats_server))
    assert again == {"subject": "cli.pubn", "stream": "CLI_PUBN", "count": 100, "duplicates": 100,
                     "first_seq": 1, "last_seq": 100, "seconds": again["seconds"], "domain": None}
    assert stream.info().state.messages == 100


def test_pub_expectations_refused_by_the_server_exit_1(js, nats_server):
    js.create_stream(name="CLI_EXP", subjects=["cli.exp"], storage="memory")
    ok(cli("pub", "cli.exp", "first", "--expect-stream", "CLI_EXP", "--expect-last-seq", "0", server=nats_server))
    fails(cli("pub", "cli.exp", "x", "--expect-last-seq", "5", server=nats_server), 1, "wrong last sequence")
    fails(cli("pub", "cli.exp", "x", "--expect-stream", "OTHER", server=nats_server), 1, "(?i)expected stream")
    ok(cli("pub", "cli.exp", "second", "--msg-id", "m2", "--expect-last-subject-seq", "1", server=nats_server))
    fails(cli("pub", "cli.exp", "x", "--expect-last-msg-id", "m1", server=nats_server), 1, "wrong last msg")
    fails(cli("pub", "cli.exp", "x", "--count", "3", "--expect-last-seq", "0", server=nats_server), 1,
          "message 1 of 3 failed: wrong last sequence")
    fails(cli("pub", "cli.nostream", "x", server=nats_server), 1, "no responders")
    assert js.stream_info("CLI_EXP").state.messages == 2


def test_pub_count_shows_a_progress_bar_on_stderr_only_when_asked(js, nats_server):
    js.create_stream(name="CLI_BAR", subjects=["cli.bar"], storage="memory")
    shown = cli("pub", "cli.bar", "x", "--count", "200", "--progress", server=nats_server)
    assert shown.returncode == 0, shown.stderr
    assert "200/200" in shown.stderr and "100%" in shown.stderr
    assert shown.stdout.startswith("published 200 messages") and "200/200" not in shown.stdout
    assert ok(cli("pub", "cli.bar", "x", "--count", "50", server=nats_server)).startswith("published 50")
    assert ok(cli("pub", "cli.bar", "x", "--count", "50", "--no-progress", server=nats_server))


@pytest.mark.timeout(60)
def test_an_interrupted_pub_count_says_how_many_were_acknowledged_and_exits_130(js, nats_server):
    js.create_stream(name="CLI_INT", subjects=["cli.int.*"], storage="memory")
    proc = subprocess.Popen([str(CLI), "pub", "cli.int.x", "m", "--count", "100000000", "--msg-id", "m-{count}"],
                            env=cli_env(nats_server), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: js.stream_info("CLI_INT").state.messages >= 2000, timeout=30, what="2000 stored")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 130 and out == ""
    m = re.fullmatch(r"jetstream-sync: error: interrupted: ([\d,]+) of 100,000,000 messages acknowledged"
                     r"(?:; up to ([\d,]+) more may have been stored)?; rerun with the same --msg-id to store the rest "
                     r"exactly once\n", err)
    assert m, err
    acked, unknown = (int((g or "0").replace(",", "")) for g in m.groups())
    stored = js.stream_info("CLI_INT").state.messages
    assert acked <= stored <= acked + unknown, (err, stored)


def test_request_prints_the_pub_ack_of_a_stream_subject_and_a_consumers_message(js, nats_server, name, subj):
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory")
    assert f'{{"stream":"{name}","seq":1}}' in ok(cli("request", f"{subj}.a", "hello", server=nats_server))
    stream.create_consumer(durable_name="D")
    # A pull request by hand: the message comes back with its own subject (and the pull's reply).
    doc = as_json(cli("req", f"$JS.API.CONSUMER.MSG.NEXT.{name}.D", "", "-j", server=nats_server))
    assert (doc["subject"], doc["data"]) == (f"{subj}.a", "hello")


def test_request_with_no_responders_says_so_at_once_and_exits_1(nats_server):
    fails(cli("request", "nobody.listens.here", "x", server=nats_server), 1, "no responders on 'nobody.listens.here'")
