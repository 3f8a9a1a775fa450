# The operator walkthrough of the JetStream model (the ORDERS example of the JetStream tech-preview
# README), typed as written with `jetstream-sync` in place of `jsm` (and `pub`, `sub`, `request` for
# nats-pub, nats-sub, nats-req), in its order, against a server of its own. The interactive forms run
# under a pseudo-terminal with the walkthrough's answers. Where the walkthrough's 2020 server and
# today's differ (the old $JS.NEXT subject, stream templates, an ack wait to sit out) the step says so.
from __future__ import annotations

import json
import queue
import re
import shlex
import signal
import subprocess
import threading
import time

import attrs
import pexpect
import pytest

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from test_cli import CLI, cli_env

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def server():
    with NatsServer() as s:
        yield s


@pytest.fixture
def api(server):
    """The library beside the command line, to check what the commands made and to set up."""
    client = jss.connect(server.url, name="walkthrough-check", timeout=5.0)
    yield client.jetstream()
    client.close()


def jsm(line: str, server, *, code: int = 0) -> str:
    """Run ``jetstream-sync <line>`` (``line`` split as a shell would) without a terminal; check the exit
    code and return stdout (stderr on a failure)."""
    proc = subprocess.run([str(CLI), *shlex.split(line)], capture_output=True, text=True, input="", timeout=60,
                          env=cli_env(server))
    assert proc.returncode == code, f"{line}\nexit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    if code == 0:
        assert proc.stderr == "", proc.stderr
    return proc.stdout if code == 0 else proc.stderr


def typed(line: str, server, answers: list[tuple[str, str | None]]) -> str:
    """Run ``jetstream-sync <line>`` on a pseudo-terminal, answering each question (a regex) as given;
    check exit 0 and return everything the terminal showed."""
    term = pexpect.spawn(str(CLI), shlex.split(line), env=cli_env(server), encoding="utf-8", timeout=30)
    try:
        for question, answer in answers:
            term.expect(question)
            if answer is not None:  # None: only wait for it (a line shown before a question)
                term.sendline(answer)
        term.expect(pexpect.EOF)
        shown = term.before
    finally:
        term.close(force=True)
    assert term.exitstatus == 0, f"{line}\nexit {term.exitstatus}\n{shown}"
    return shown


class Running:
    """A long-running command (``sub``, ``con events``) whose lines are read as they come."""

    def __init__(self, line: str, server) -> None:
        self.proc = subprocess.Popen([str(CLI), *shlex.split(line)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, env=cli_env(server))
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, pattern: str, act=lambda: None, timeout: float = 30.0) -> str:
        """Call ``act()`` every 0.3 s until a line matches ``pattern``; return that line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            act()
            try:
                line = self.lines.get(timeout=0.3)
            except queue.Empty:
                continue
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s")

    def interrupt(self) -> None:
        """Ctrl-C: it ends at once, with exit 130 and no traceback."""
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=10)
        assert self.proc.returncode == 130 and "Traceback" not in err, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


STR_ADD = ('str add ORDERS --subjects "ORDERS.*" --ack --max-msgs=-1 --max-bytes=-1 --max-age=1y --storage file '
           '--retention limits --max-msg-size=-1')
STREAM_QUESTIONS = [("Subjects to consume", "ORDERS.*"), ("Storage backend", "file"), ("Retention Policy", "Limits"),
                    ("Message count limit", "-1"), ("Message size limit", "-1"),
                    ("Maximum message age limit", "1y"), ("Maximum individual message size", "-1"),
                    ("Number of replicas", "")]
YEAR_NS = 365 * 24 * 3600 * 10**9


def test_the_scenarios_configuration_block_runs_as_written(server, api):
    jsm(STR_ADD, server)
    jsm("con add ORDERS NEW --filter ORDERS.received --ack explicit --pull --deliver all --max-deliver=-1 "
        "--sample 100", server)
    jsm("con add ORDERS DISPATCH --filter ORDERS.processed --ack explicit --pull --deliver all --max-deliver=-1 "
        "--sample 100", server)
    jsm("con add ORDERS MONITOR --filter '' --ack none --target monitor.ORDERS --deliver last --replay instant",
        server)
    new, monitor = api.consumer_info("ORDERS", "NEW").config, api.consumer_info("ORDERS", "MONITOR").config
    assert (new.filter_subject, new.sample_freq, new.max_deliver, new.deliver_subject) == \
        ("ORDERS.received", "100%", -1, None)
    assert (monitor.deliver_subject, monitor.filter_subject, str(monitor.ack_policy), str(monitor.deliver_policy)) \
        == ("monitor.ORDERS", None, "none", "last")
    assert api.stream_info("ORDERS").config.max_age == 365 * 24 * 3600
    jsm("str rm ORDERS -f", server)


def test_the_walkthrough_runs_in_order_as_typed(server, api):
    # --- Account Information
    assert "Streams:" in jsm("account info", server)

    # --- Streams: creating, interactively and then as one command (the same config: it succeeds)
    shown = typed("str add ORDERS", server, STREAM_QUESTIONS)
    assert "created stream ORDERS" in shown and re.search(r"Max age:\s+8760h0m0s", shown)
    assert "created stream ORDERS" in jsm(STR_ADD, server)

    # --- listing and querying
    assert re.search(r"^ORDERS\s+ORDERS\.\*", jsm("str ls", server), re.M)
    info = jsm("str info ORDERS", server)
    assert re.search(r"Subjects:\s+ORDERS\.\*", info) and re.search(r"Storage:\s+file", info)
    config = json.loads(jsm("str info ORDERS -j", server))["config"]
    assert (config["subjects"], config["retention"], config["max_msgs"], config["max_bytes"], config["max_age"],
            config["storage"], config["num_replicas"]) == (["ORDERS.*"], "limits", -1, -1, YEAR_NS, "file", 1)

    # --- copying and editing
    assert re.search(r"Max age:\s+17520h0m0s", jsm('str cp ORDERS ARCHIVE --subjects "ORDERS_ARCVHIVE.*" --max-age 2y',
                                                   server))
    assert json.loads(jsm("str info ORDERS -j", server))["config"]["subjects"] == ["ORDERS.*"]  # | jq .config.subjects
    # on a terminal, as typed: the subjects are those the stream has, so there is nothing to confirm
    assert "updated stream ORDERS" in typed('str edit ORDERS --subjects "ORDERS.*"', server, [])

    # --- publishing into the stream: nats-pub, and nats-req to see the publish acknowledgement
    assert "stream ORDERS seq 1" in jsm("pub ORDERS.scratch hello", server)
    assert '{"stream":"ORDERS","seq":2}' in jsm("request ORDERS.scratch hello", server)
    assert re.search(r"Messages:\s+2\b", jsm("str info ORDERS", server))

    # --- deleting a message, all data, the stream. The walkthrough deletes message 1 after the purge; a
    # purge has removed it by then (today's server says "no message"), so the one message goes first.
    assert "deleted message 1 from stream ORDERS" in jsm("str rmm ORDERS 1 -f", server)
    assert "purged 1 message from stream ORDERS" in jsm("str purge ORDERS -f", server)
    assert "deleted stream ORDERS" in jsm("str rm ORDERS -f", server)
    jsm(STR_ADD, server)

    # --- Consumers: a pull consumer made interactively, then the same as one command
    assert "no consumers on stream ORDERS" in jsm("con ls ORDERS", server)
    shown = typed("con add --sample 100", server, [
        ("Select a Stream", "ORDERS"), ("Consumer name", "NEW"), ("Delivery target", ""),
        (r"Start policy \(all, last, 1h, msg sequence\)", "all"), (r"Filter Stream by subject \(blank for all\)",
                                                                  "ORDERS.received"),
        ("Maximum Allowed Deliveries", "20")])
    assert re.search(r"Pull Mode:\s+true", shown) and re.search(r"Sampling Rate:\s+100", shown)
    jsm("con add ORDERS DISPATCH --filter ORDERS.processed --ack explicit --pull --deliver all --sample 100 "
        "--max-deliver 20", server)
    new, dispatch = api.consumer_info("ORDERS", "NEW").config, api.consumer_info("ORDERS", "DISPATCH").config
    same = dict(durable_name=None, name=None, filter_subject=None)
    assert new.filter_subject == "ORDERS.received" and new.max_deliver == 20
    assert attrs.evolve(new, **same) == attrs.evolve(dispatch, **same)

    # --- a push consumer made interactively; the one-command form finds the same config (and succeeds)
    shown = typed("con add", server, [
        ("Select a Stream", "ORDERS"), ("Consumer name", "MONITOR"), ("Delivery target", "monitor.ORDERS"),
        (r"Start policy \(all, last, 1h, msg sequence\)", "last"), ("Acknowledgement policy", "none"),
        ("Replay policy", "instant"), (r"Filter Stream by subject \(blank for all\)", ""),
        ("Maximum Allowed Deliveries", "-1")])
    assert re.search(r"Delivery Subject:\s+monitor\.ORDERS", shown)
    jsm("con add ORDERS MONITOR --ack none --target monitor.ORDERS --deliver last --replay instant --filter ''",
        server)

    # --- listing and querying consumers
    assert re.findall(r"^(DISPATCH|MONITOR|NEW)\b", jsm("con ls ORDERS", server), re.M) == ["DISPATCH", "MONITOR",
                                                                                          "NEW"]
    info = jsm("con info ORDERS DISPATCH", server)
    assert re.search(r"Pull Mode:\s+true", info) and re.search(r"Sampling Rate:\s+100", info)

    # --- consuming the pull consumer
    for n in (1, 2, 3):
        jsm(f'pub ORDERS.processed "order {n}"', server)
    for n in (1, 2):
        out = jsm("con next ORDERS DISPATCH", server)
        assert f"\norder {n}\n" in out and out.endswith("Acknowledged message\n")
    # The walkthrough's `nats-req '$JS.NEXT.ORDERS.DISPATCH' ''`: today's server takes the pull request on
    # $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>.
    assert "\norder 3\n" in jsm("request '$JS.API.CONSUMER.MSG.NEXT.ORDERS.DISPATCH' ''", server)

    # --- consuming the push consumer: the subject shown is the message's own
    assert re.search(r"Delivery Subject:\s+monitor\.ORDERS", jsm("con info ORDERS MONITOR", server))
    sub = Running("sub monitor.ORDERS", server)
    try:
        assert re.fullmatch(r"\[#1\] Received on \[ORDERS\.processed\]: 'order \d'", sub.until(r"Received"))
        sub.interrupt()
    finally:
        sub.close()

    # --- Model Deep Dive, acknowledgement models: a clean ORDERS stream and DISPATCH consumer. Its ack
    # wait is 2 s (the walkthrough's server redelivered at once), so a message left unacked comes back
    # within con next's wait.
    jsm("str rm ORDERS -f", server)
    jsm(STR_ADD, server)
    jsm("con add ORDERS DISPATCH --filter ORDERS.processed --ack explicit --pull --deliver all --sample 100 "
        "--max-deliver 20 --ack-wait 2s", server)
    assert re.search(r"Messages:\s+0\b", jsm("str info ORDERS", server))
    assert re.search(r"Pending:\s+0\b", jsm("con info ORDERS DISPATCH", server))
    jsm('pub ORDERS.processed "order 4"', server)
    assert re.search(r"Messages:\s+1\b", jsm("str info ORDERS", server))
    assert "Acknowledged message" in jsm("con next ORDERS DISPATCH", server)
    info = jsm("con info ORDERS DISPATCH", server)
    assert re.search(r"Ack floor:\s+stream seq 1, consumer seq 1", info) and re.search(r"Ack pending:\s+0\b", info)
    jsm('pub ORDERS.processed "order 5"', server)
    for redelivered in (0, 1):
        out = jsm("con next ORDERS DISPATCH --no-ack", server)
        assert "\norder 5\n" in out and "Acknowledged" not in out
        info = jsm("con info ORDERS DISPATCH", server)
        assert re.search(r"Ack pending:\s+1\b", info) and re.search(rf"Redelivered:\s+{redelivered}\b", info)
    assert "Acknowledged message" in jsm("con next ORDERS DISPATCH", server)
    assert re.search(r"Ack pending:\s+0\b", jsm("con info ORDERS DISPATCH", server))

    # --- consumer starting position: a new ORDERS stream with 100 messages
    jsm("str rm ORDERS -f", server)
    jsm(STR_ADD, server)
    for n in range(1, 101):
        api.publish("ORDERS.processed", f"order {n}")
    for name, deliver, first in (("ALL", "all", 1), ("LAST", "last", 100), ("TEN", "10", 10)):
        jsm(f"con add ORDERS {name} --pull --filter ORDERS.processed --ack none --replay instant --deliver {deliver}",
            server)
        assert f"\norder {first}\n" in jsm(f"con next ORDERS {name}", server)
    # `jsm str purge ORDERS` without -f: it asks, and the walkthrough's operator says yes.
    assert "purged 100 messages" in typed("str purge ORDERS", server, [(r"Really purge stream ORDERS\? \[y/N\]", "y")])
    for n in (1, 2, 3):  # the walkthrough waits a minute between them; here all three are within 2m
        jsm(f'pub ORDERS.processed "order {n}"', server)
    jsm("con add ORDERS 2MIN --pull --filter ORDERS.processed --ack none --replay instant --deliver 2m", server)
    assert "\norder 1\n" in jsm("con next ORDERS 2MIN", server)

    # --- ephemeral consumers: a subscriber on the delivery subject, then a consumer with no name
    sub = Running("sub my.monitor", server)
    try:
        jsm("con add ORDERS --filter '' --ack none --target 'my.monitor' --deliver last --replay instant --ephemeral",
            server)
        assert sub.until(r"Received") == "[#1] Received on [ORDERS.processed]: 'order 3'"
        sub.interrupt()
    finally:
        sub.close()

    # --- consumer message rates: replayed at the pace they were stored, with timestamps
    shown = jsm("con add ORDERS REPLAY --target out.original --filter ORDERS.processed --ack none --deliver all "
                "--sample 100 --replay original", server)
    assert re.search(r"Replay policy:\s+original", shown)
    sub = Running("sub -t out.original", server)
    try:
        line = sub.until(r"Received")
        assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[#1\] Received on \[ORDERS\.processed\]: 'order 1'",
                            line)
        sub.interrupt()
    finally:
        sub.close()

    # --- stream templates: nats-server 2.14 removed them, and the command says so
    err = jsm('str template add CLIENTS --subjects "CLIENT.*" --ack --max-msgs=-1 --max-bytes=-1 --max-age=1y '
              '--storage file --retention limits --max-msg-size 2048 --max-streams 1024', server, code=1)
    assert "stream templates were removed from nats-server" in err

    # --- ack sampling: NEW as the scenario configures it, its samples as readable lines and as JSON
    jsm("con add ORDERS NEW --filter ORDERS.received --ack explicit --pull --deliver all --max-deliver=-1 "
        "--sample 100", server)
    assert re.search(r"Sampling Rate:\s+100", jsm("con info ORDERS NEW", server))
    new = api.consumer("ORDERS", "NEW")

    def order_received_and_acked() -> None:
        api.publish("ORDERS.received", b"order")
        new.next(timeout=5).ack()

    for line, pattern in (("con events ORDERS NEW", r"Acknowledgement Sample"),
                          ("con events ORDERS NEW --json", r'"stream_seq"')):
        events = Running(line, server)
        try:
            first = events.until(pattern, act=order_received_and_acked)
            if line.endswith("--json"):
                sample = json.loads(first)
                assert (sample["stream"], sample["consumer"], sample["deliveries"]) == ("ORDERS", "NEW", 1)
            else:
                shown = [events.until(p) for p in (r"Stream Sequence: \d+", r"Deliveries: 1", r"Delay: ")]
                assert len(shown) == 3
            events.interrupt()
        finally:
            events.close()


def test_a_delete_asked_on_a_terminal_is_a_no_unless_answered_yes(server, api):
    api.create_stream(name="KEEP", subjects=["keep.>"], storage="memory")
    assert "stream KEEP not deleted" in typed("str rm KEEP", server, [(r"Really delete stream KEEP\? \[y/N\]", "")])
    assert "consumer x not deleted" in typed("con rm KEEP x", server, [(r"Really delete consumer x", "n")])
    assert "KEEP" in list(api.stream_names())
    assert "deleted stream KEEP" in typed("str rm KEEP", server, [(r"Really delete stream KEEP\?", "yes")])
    assert "KEEP" not in list(api.stream_names())


def test_a_question_answered_wrongly_is_asked_again_and_flags_given_are_not_asked(server, api):
    shown = typed("str add ASKED --max-age 1h --replicas 1", server, [
        ("Subjects to consume", "asked.a asked.b"), ("Storage backend", "tape"), ("Storage backend", "memory"),
        ("Retention Policy", ""), ("Message count limit", "ten"), ("Message count limit", "10"),
        ("Message size limit", "1MiB"), ("Maximum individual message size", "")])
    assert "created stream ASKED" in shown  # each wrong answer was followed by the same question again
    config = api.stream_info("ASKED").config
    assert (config.subjects, str(config.storage), str(config.retention), config.max_msgs, config.max_bytes,
            config.max_age, config.max_msg_size) == (["asked.a", "asked.b"], "memory", "limits", 10, 1024**2,
                                                     3600.0, -1)
    api.delete_stream("ASKED")


def again(reason: str, question: str) -> str:
    """The pattern of a refused answer: its reason, then the same question again."""
    return rf"{reason}[\s\S]*?{question}"


def test_a_wrong_answer_to_really_is_asked_again_and_only_yes_deletes(server, api):
    api.create_stream(name="MAYBE", subjects=["maybe.>"], storage="memory")
    shown = typed("str rm MAYBE", server, [(r"Really delete stream MAYBE\? \[y/N\]", "maybe"),
                                           (again(r"answer y \(yes\) or n \(no\)", r"Really delete stream MAYBE\?"),
                                            "yse"),
                                           (again(r"answer y", r"Really delete stream MAYBE\?"), "no")])
    assert "stream MAYBE not deleted" in shown and "MAYBE" in list(api.stream_names())
    assert "deleted stream MAYBE" in typed("str rm MAYBE", server, [(r"Really delete stream MAYBE\?", "sure"),
                                                                    (again("answer y", "Really delete"), "Y")])
    assert "MAYBE" not in list(api.stream_names())


def test_a_name_or_subject_the_config_refuses_is_asked_again_at_once_with_the_reason(server, api):
    # Each answer is checked when given: the same question comes back at once, with the reason, rather
    # than an error after the last question.
    shown = typed("str add", server, [
        ("Stream name", "MY STREAM"), (again("must not contain whitespace", "Stream name"), "MINE"),
        ("Subjects to consume", "mine.a*"), (again("not a valid subject", "Subjects to consume"), "mine.>"),
        ("Storage backend", "memory"), ("Retention Policy", ""), ("Message count limit", ""),
        ("Message size limit", ""), ("Maximum message age limit", ""), ("Maximum individual message size", ""),
        ("Number of replicas", "")])
    assert "created stream MINE" in shown and api.stream_info("MINE").config.subjects == ["mine.>"]
    shown = typed("con add MINE", server, [
        ("Consumer name", "my reader"), (again("must not contain whitespace", "Consumer name"), "READER"),
        ("Delivery target", ""), (r"Start policy", ""), (r"Filter Stream by subject", "mine..x"),
        (again("not a valid subject", "Filter Stream by subject"), "mine.x"),
        ("Maximum Allowed Deliveries", "0"), (again(r"-1 \(unlimited\) or >= 1", "Maximum Allowed Deliveries"), "3")])
    config = api.consumer_info("MINE", "READER").config
    assert "created consumer READER" in shown and (config.filter_subject, config.max_deliver) == ("mine.x", 3)
    api.delete_stream("MINE")


def test_edit_on_a_terminal_shows_the_changes_and_asks_first(server, api):
    api.create_stream(name="EDITED", subjects=["edited.>"], storage="memory", max_age=86400.0, max_msgs=10)
    shown = typed("str edit EDITED --max-age 1h --max-msgs 20 --description 'now described'", server, [
        (r"Changes to stream EDITED:", None), (r"description: \(unset\) -> \"now described\"", None),
        (r"max_age: 24h0m0s -> 1h0m0s", None), (r"max_msgs: 10 -> 20", None),
        (r"Really edit stream EDITED\? \[y/N\]", "n")])
    assert "stream EDITED not edited" in shown and api.stream_info("EDITED").config.max_msgs == 10
    shown = typed("str edit EDITED --max-msgs 20", server, [(r"max_msgs: 10 -> 20", None),
                                                            (r"Really edit stream EDITED\?", "y")])
    assert "updated stream EDITED" in shown and api.stream_info("EDITED").config.max_msgs == 20
    # -f changes without asking; a change to nothing asks nothing
    assert "updated stream EDITED" in typed("str edit EDITED --max-msgs 30 -f", server, [])
    assert "updated stream EDITED" in typed("str edit EDITED --max-msgs 30", server, [])
    assert api.stream_info("EDITED").config.max_msgs == 30
    api.delete_stream("EDITED")
