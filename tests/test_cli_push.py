# Charter: the push side of the command line (docs/cli.md) through the real console script:
# `consumer add --target/--deliver-group/--flow-control/--heartbeat` and its rules, `consumer info`
# showing the delivery subject or pull mode, `consumer sub` printing and acking, `sub SUBJECT` in the
# nats-sub format, and Ctrl-C ending the long-running ones at once with one line.
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import wait_for
from test_cli import CLI, ERROR, as_json, cli, cli_env, fails, interrupted, ok

pytestmark = pytest.mark.timeout(60)

NS = 1_000_000_000


@pytest.fixture
def orders(js):
    """A memory stream CLI_P on cli.p.* with 3 messages on cli.p.new."""
    js.create_stream(name="CLI_P", subjects=["cli.p.*"], storage="memory")
    for i in range(1, 4):
        js.publish("cli.p.new", b"order %d" % i)
    return js


def test_add_with_a_target_makes_a_push_consumer_and_info_shows_the_delivery(orders, nats_server):
    doc = as_json(cli("consumer", "add", "CLI_P", "monitor", "--target", "monitor.p", "--flow-control",
                      "--heartbeat", "2s", "--sample-freq", "100", "--json", server=nats_server))
    cfg = doc["config"]
    assert (cfg["deliver_subject"], cfg["flow_control"], cfg["idle_heartbeat"]) == ("monitor.p", True, 2 * NS)
    human = ok(cli("consumer", "info", "CLI_P", "monitor", server=nats_server))
    assert "Delivery Subject:" in human and "monitor.p" in human and "Pull Mode" not in human
    assert "Flow Control:" in human and "Idle Heartbeat:" in human and "Sampling Rate:" in human
    ok(cli("consumer", "add", "CLI_P", "puller", server=nats_server))
    pulled = ok(cli("consumer", "info", "CLI_P", "puller", server=nats_server))
    assert "Pull Mode:" in pulled and "true" in pulled and "Delivery Subject" not in pulled
    grouped = as_json(cli("consumer", "add", "CLI_P", "grp", "--target", "grp.p", "--deliver-group", "workers",
                          "--json", server=nats_server))
    assert grouped["config"]["deliver_group"] == "workers"


@pytest.mark.parametrize("flags, match", [
    (["--target", "x.p", "--deliver-group", "g", "--flow-control", "--heartbeat", "1s"],
     "--deliver-group with --flow-control and --heartbeat"),
    (["--target", "x.p", "--deliver-group", "g", "--heartbeat", "1s"], "--deliver-group with --heartbeat"),
    (["--target", "x.p", "--flow-control"], "--flow-control needs --heartbeat"),
    (["--deliver-group", "g"], "--deliver-group is for push consumers: give --target"),
], ids=["group+fc+hb", "group+hb", "fc without hb", "group without target"])
def test_push_flags_that_cannot_work_are_refused_before_anything_is_sent(orders, nats_server, flags, match):
    fails(cli("consumer", "add", "CLI_P", "bad", *flags, server=nats_server), 2, match)
    assert "bad" not in set(orders.consumer_names("CLI_P"))


def test_consumer_sub_prints_and_acks_each_message_and_json_gives_one_object_per_line(orders, nats_server):
    orders.create_push_consumer("CLI_P", durable_name="watch", deliver_subject="watch.p", ack_wait=30)
    out = ok(cli("consumer", "sub", "CLI_P", "watch", "--count", "3", server=nats_server))
    assert out.count("[CLI_P #") == 3 and "order 1" in out and "order 3" in out
    wait_for(lambda: orders.consumer_info("CLI_P", "watch").num_ack_pending == 0, 5, what="the acks applied")
    assert orders.consumer_info("CLI_P", "watch").ack_floor.stream_seq == 3

    orders.create_push_consumer("CLI_P", durable_name="peek", deliver_subject="peek.p", ack_wait=30)
    lines = ok(cli("consumer", "sub", "CLI_P", "peek", "--count", "2", "--no-ack", "--json",
                   server=nats_server)).splitlines()
    docs = [json.loads(line) for line in lines]
    assert [(d["seq"], d["subject"], d["data"], d["acked"]) for d in docs] == [
        (1, "cli.p.new", "order 1", False), (2, "cli.p.new", "order 2", False)]


def test_consumer_sub_on_a_pull_consumer_names_it(orders, nats_server):
    orders.create_consumer("CLI_P", durable_name="pully")
    fails(cli("consumer", "sub", "CLI_P", "pully", server=nats_server), 1,
          "'pully'.*pull consumer.*`jetstream-sync consumer next CLI_P pully`")


def test_consumer_next_on_a_push_consumer_names_the_command_that_reads_it(orders, nats_server):
    orders.create_push_consumer("CLI_P", durable_name="pushy", deliver_subject="pushy.p")
    line = fails(cli("consumer", "next", "CLI_P", "pushy", server=nats_server), 1,
                 "'pushy'.*push consumer.*`jetstream-sync consumer sub CLI_P pushy`")
    assert "push_consumer()" not in line  # the command line's answer, not the library's


def test_sub_prints_messages_as_nats_sub_does_under_their_stream_subject_on_a_deliver_subject(
        orders, nats_server):
    consumer = orders.create_push_consumer("CLI_P", durable_name="mon", deliver_subject="monitor.orders",
                                           ack_policy="none")
    proc = subprocess.Popen([str(CLI), "sub", "monitor.orders", "--count", "3"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(nats_server))
    try:
        out, err = proc.communicate(timeout=20)  # the server delivers as soon as the CLI's interest shows
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and err == ""
    assert out.splitlines() == [f"[#{i}] Received on [cli.p.new]: 'order {i}'" for i in (1, 2, 3)]
    assert consumer.info().delivered.stream_seq == 3


def test_an_invalid_subject_is_refused_before_connecting():
    # No server at all: the error must come from the subject, not from connecting.
    fails(cli("sub", "bad subject", env=cli_env("nats://127.0.0.1:1")), 2, "subject")


@pytest.mark.parametrize("command", [["sub", "idle.p"], ["consumer", "sub", "CLI_P", "idle"]],
                         ids=["sub", "consumer sub"])
def test_ctrl_c_ends_a_running_sub_within_a_second_with_one_line(orders, nats_server, command):
    # Either way the CLI subscribes to idle.p, the deliver subject of a consumer with nothing to
    # deliver: its push_bound says when the interest has reached the server.
    orders.create_push_consumer("CLI_P", durable_name="idle", deliver_subject="idle.p", filter_subject="cli.p.none")
    proc, took = interrupted(command, nats_server, lambda: orders.consumer_info("CLI_P", "idle").push_bound,
                             "the CLI subscribed")
    assert proc.returncode == 130 and took < 1.5
    assert proc.stderr.splitlines() == [f"{ERROR}interrupted"] and proc.stdout == ""

