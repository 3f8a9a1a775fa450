# Charter: `jetstream-sync consumer add|ls|info|next|pause|resume|rm` through the real console script
# against the shared server: config flags landing in the server's config, tables and --json, `next`
# acking (or not) what it printed, pause and resume as the server reports them, and exit 3 for a
# missing consumer or no message in time.
from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from conftest import wait_for
from test_cli import CLI, as_json, cli, cli_env, fails, ok

pytestmark = pytest.mark.timeout(60)

NS = 1_000_000_000


@pytest.fixture
def orders(js):
    """A memory stream CLI_C with 5 messages on cli.c.new and 1 on cli.c.paid."""
    js.create_stream(name="CLI_C", subjects=["cli.c.*"], storage="memory")
    for i in range(1, 6):
        js.publish("cli.c.new", b"order %d" % i, headers={"X-Order": str(i)})
    js.publish("cli.c.paid", b"paid 1")
    return js


def test_add_sets_the_flags_given_and_prints_the_consumer_info(orders, nats_server):
    doc = as_json(cli("consumer", "add", "CLI_C", "billing", "--filter", "cli.c.new", "--ack-wait", "45s",
                      "--max-deliver", "5", "--max-ack-pending", "100", "--start-seq", "3", "--replay", "instant",
                      "--inactive-threshold", "10m", "--description", "bills orders", "--max-waiting", "16",
                      "--json", server=nats_server))
    cfg = doc["config"]
    assert (doc["name"], doc["stream_name"], cfg["durable_name"]) == ("billing", "CLI_C", "billing")
    assert (cfg["filter_subject"], cfg["deliver_policy"], cfg["opt_start_seq"]) == ("cli.c.new", "by_start_sequence", 3)
    assert (cfg["ack_policy"], cfg["ack_wait"], cfg["max_deliver"]) == ("explicit", 45 * NS, 5)
    assert (cfg["max_ack_pending"], cfg["max_waiting"], cfg["inactive_threshold"]) == (100, 16, 600 * NS)
    assert cfg["description"] == "bills orders"
    assert doc["num_pending"] == 3  # orders 3, 4, 5
    info = orders.consumer_info("CLI_C", "billing")
    assert info.config.ack_wait == 45.0

    human = ok(cli("consumer", "add", "CLI_C", "both", "--filter", "cli.c.new", "--filter", "cli.c.paid",
                   "--deliver", "last-per-subject", "--backoff", "1s,5s", "--max-deliver", "3",
                   server=nats_server))
    assert human.startswith("created consumer both on stream CLI_C\n")
    assert "Filter:          cli.c.new, cli.c.paid" in human and "Backoff:         1s, 5s" in human
    ephemeral = as_json(cli("consumer", "add", "CLI_C", "--ephemeral", "--inactive-threshold", "30s", "--json",
                            server=nats_server))
    assert ephemeral["name"] and "durable_name" not in ephemeral["config"]
    fails(cli("consumer", "add", "CLI_C", "bad", "--start-seq", "3", "--deliver", "new", server=nats_server),
          2, "opt_start_seq requires deliver_policy")
    fails(cli("consumer", "add", "CLI_NOPE", "x", server=nats_server), 3, "stream 'CLI_NOPE' not found")


def test_ls_shows_a_table_names_and_json(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="a", filter_subject="cli.c.new")
    orders.create_consumer("CLI_C", durable_name="b")
    table = ok(cli("consumer", "ls", "CLI_C", server=nats_server)).splitlines()
    assert table[0].split()[:3] == ["NAME", "FILTER", "ACK"]
    assert [line.split()[:4] for line in table[1:]] == [["a", "cli.c.new", "explicit", "0"],
                                                        ["b", "-", "explicit", "0"]]
    assert as_json(cli("consumer", "ls", "CLI_C", "--names", "--json", server=nats_server)) == ["a", "b"]
    docs = as_json(cli("consumer", "ls", "CLI_C", "--json", server=nats_server))
    assert [(d["name"], d["num_pending"]) for d in docs] == [("a", 5), ("b", 6)]


def test_info_shows_config_and_progress_and_missing_ones_exit_3(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="reader", ack_wait=20.0)
    human = ok(cli("consumer", "info", "CLI_C", "reader", server=nats_server))
    assert "Consumer: reader" in human and "Ack wait:        20s" in human and "Pending:        6" in human
    doc = as_json(cli("consumer", "info", "CLI_C", "reader", "--json", server=nats_server))
    assert (doc["config"]["ack_wait"], doc["num_pending"]) == (20 * NS, 6)
    fails(cli("consumer", "info", "CLI_C", "nobody", server=nats_server), 3, "consumer 'nobody' not found")
    fails(cli("consumer", "info", "CLI_NOPE", "reader", server=nats_server), 3, "stream 'CLI_NOPE' not found")


def test_next_prints_and_acks_messages(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="worker", filter_subject="cli.c.new")
    out = ok(cli("consumer", "next", "CLI_C", "worker", "--count", "2", server=nats_server))
    assert out.startswith("[CLI_C #1] cli.c.new")
    assert "X-Order: 1\n\norder 1\n" in out and "order 2" in out
    assert out.count("\nAcknowledged message\n") == 2 and out.endswith("Acknowledged message\n")
    # The CLI flushed its acks before exiting; the server applies them to the consumer on its own time.
    wait_for(lambda: orders.consumer_info("CLI_C", "worker").ack_floor.stream_seq == 2, timeout=5,
             what="the CLI's acks to move the ack floor")
    assert orders.consumer_info("CLI_C", "worker").num_ack_pending == 0

    docs = as_json(cli("consumer", "next", "CLI_C", "worker", "--no-ack", "--json", server=nats_server))
    assert len(docs) == 1
    doc = docs[0]
    assert (doc["stream"], doc["seq"], doc["consumer"], doc["consumer_seq"]) == ("CLI_C", 3, "worker", 3)
    assert (doc["data"], doc["headers"], doc["delivered"], doc["pending"], doc["acked"]) == \
        ("order 3", {"X-Order": ["3"]}, 1, 2, False)
    assert orders.consumer_info("CLI_C", "worker").num_ack_pending == 1  # not acked


def test_next_interrupted_before_printing_its_json_acks_nothing_and_naks_for_prompt_redelivery(orders,
                                                                                              nats_server):
    consumer = orders.create_consumer("CLI_C", durable_name="careful", filter_subject="cli.c.new", ack_wait=60)
    # --json prints nothing until the pull ends (--count 100, --wait 30s): interrupt it holding 5 messages.
    proc = subprocess.Popen([str(CLI), "consumer", "next", "CLI_C", "careful", "--count", "100", "--wait", "30s",
                             "--json"], env=cli_env(nats_server), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: consumer.info().num_ack_pending == 5, timeout=15, what="the CLI to receive the 5 messages")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (130, "", "jetstream-sync: error: interrupted\n")
    assert consumer.info().ack_floor.consumer_seq == 0           # none acked
    # NAKed, so they come back now rather than after the 60 s ack wait.
    again = list(consumer.fetch(max_messages=5, expires=5.0))
    assert sorted((m.data, m.metadata.num_delivered) for m in again) == [(b"order %d" % i, 2) for i in range(1, 6)]


def test_next_without_a_message_in_time_exits_3(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="idle", filter_subject="cli.c.none")
    started = time.monotonic()
    fails(cli("consumer", "next", "CLI_C", "idle", "--wait", "300ms", server=nats_server), 3,
          "no message from consumer 'idle' within 300ms")
    assert time.monotonic() - started < 5.0
    fails(cli("consumer", "next", "CLI_C", "nobody", server=nats_server), 3, "consumer 'nobody' not found")


def test_timeout_is_the_request_timeout_before_or_after_next_and_the_wait_is_wait(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="idle", filter_subject="cli.c.none")
    # --timeout means the same on either side of the command; the pull's wait defaults to it.
    for args in (["--timeout", "400ms", "consumer", "next", "CLI_C", "idle"],
                 ["consumer", "next", "CLI_C", "idle", "--timeout", "400ms"]):
        fails(cli(*args, server=nats_server), 3, "within 400ms$")
    # --wait is the pull's own: a long request timeout does not stretch it, nor a short one cut it.
    fails(cli("consumer", "next", "CLI_C", "idle", "--timeout", "20s", "--wait", "300ms", server=nats_server), 3,
          "within 300ms$")
    fails(cli("--timeout", "2s", "consumer", "next", "CLI_C", "idle", "--wait", "2.5s", server=nats_server), 3,
          "within 2.5s$")
    help_text = ok(cli("consumer", "next", "--help"))
    assert "--wait DURATION" in help_text


def test_rm_f_deletes_without_asking_and_a_missing_consumer_exits_3(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="gone")
    assert ok(cli("consumer", "rm", "CLI_C", "gone", "-f", server=nats_server, input="")) == \
        "deleted consumer gone from stream CLI_C\n"
    assert list(orders.consumer_names("CLI_C")) == []
    fails(cli("consumer", "rm", "CLI_C", "gone", "--force", server=nats_server), 3, "consumer 'gone' not found")


def test_add_takes_a_json_config_file_and_flags_override_it(orders, nats_server, tmp_path):
    config = tmp_path / "consumer.json"
    config.write_text(json.dumps({"durable_name": "fromfile", "filter_subject": "cli.c.paid",
                                  "ack_wait": 10 * NS, "max_deliver": 9}))
    doc = as_json(cli("consumer", "add", "CLI_C", "--config", str(config), "--max-deliver", "2", "--json",
                      server=nats_server))
    assert (doc["name"], doc["config"]["filter_subject"]) == ("fromfile", "cli.c.paid")
    assert (doc["config"]["ack_wait"], doc["config"]["max_deliver"], doc["num_pending"]) == (10 * NS, 2, 1)


def _raw_info(js, stream: str, consumer: str) -> dict:
    return json.loads(js.client.request(f"$JS.API.CONSUMER.INFO.{stream}.{consumer}", b"").data)


def test_pause_until_a_time_or_for_a_duration_then_resume(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="held")
    human = ok(cli("consumer", "pause", "CLI_C", "held", "10m", "-f", server=nats_server))
    assert human.startswith("paused consumer held of stream CLI_C until ") and human.endswith(" remaining)\n")
    raw = _raw_info(orders, "CLI_C", "held")
    assert raw["paused"] is True and 500 * NS < raw["pause_remaining"] <= 600 * NS
    shown = ok(cli("consumer", "info", "CLI_C", "held", server=nats_server))
    assert "Paused until:" in shown and "Paused:" in shown and "remaining" in shown

    doc = as_json(cli("consumer", "pause", "CLI_C", "held", "--for", "1h", "-f", "--json", server=nats_server))
    assert (doc["stream"], doc["consumer"], doc["paused"]) == ("CLI_C", "held", True)
    assert 3500 * NS < doc["pause_remaining"] <= 3600 * NS
    doc = as_json(cli("consumer", "pause", "CLI_C", "held", "2099-01-02 03:04:05", "-f", "--json",
                      server=nats_server))
    assert doc["pause_until"] == "2099-01-02T03:04:05Z"  # the nats CLI's form, read as UTC
    assert _raw_info(orders, "CLI_C", "held")["config"]["pause_until"] == "2099-01-02T03:04:05Z"

    assert ok(cli("consumer", "resume", "CLI_C", "held", "-f", server=nats_server)) == \
        "resumed consumer held of stream CLI_C (it was paused until 2099-01-02T03:04:05Z)\n"
    assert "paused" not in _raw_info(orders, "CLI_C", "held")
    assert "Paused:" not in ok(cli("consumer", "info", "CLI_C", "held", server=nats_server))
    fails(cli("consumer", "resume", "CLI_C", "held", "-f", server=nats_server), 1,
          "consumer 'held' of stream 'CLI_C' is not paused")
    assert as_json(cli("consumer", "pause", "CLI_C", "held", "1h", "-f", "-j", server=nats_server))["paused"]
    assert as_json(cli("consumer", "resume", "CLI_C", "held", "-f", "-j", server=nats_server)) == \
        {"stream": "CLI_C", "consumer": "held", "paused": False}


def test_pause_refuses_a_missing_bad_or_past_time_and_a_missing_consumer(orders, nats_server):
    orders.create_consumer("CLI_C", durable_name="held")
    fails(cli("consumer", "pause", "CLI_C", "held", "-f", server=nats_server), 2,
          "UNTIL .* or --for DURATION is required; there is no terminal")
    fails(cli("consumer", "pause", "CLI_C", "held", "10m", "--for", "1h", "-f", server=nats_server), 2,
          "give UNTIL or --for, not both")
    fails(cli("consumer", "pause", "CLI_C", "held", "soon", "-f", server=nats_server), 2, "invalid time 'soon'")
    fails(cli("consumer", "pause", "CLI_C", "held", "2020-01-01T00:00:00Z", "-f", server=nats_server), 2,
          "until must be in the future")
    fails(cli("consumer", "pause", "CLI_C", "held", "10m", server=nats_server), 2, "give -f")
    fails(cli("consumer", "resume", "CLI_C", "held", server=nats_server), 1, "is not paused")
    fails(cli("consumer", "pause", "CLI_C", "nobody", "10m", "-f", server=nats_server), 3,
          "consumer 'nobody' not found on stream 'CLI_C'")
    fails(cli("consumer", "resume", "CLI_NOPE", "held", "-f", server=nats_server), 3, "stream 'CLI_NOPE' not found")
    assert "paused" not in _raw_info(orders, "CLI_C", "held")
