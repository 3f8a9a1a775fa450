# Charter: `jetstream-sync stream add|ls|info|edit|cp|purge|rmm|get|rm` through the real console
# script against the shared server: human and --json output, config flags landing in the
# server's config, edit keeping what it was not told to change, not found as exit 3.
from __future__ import annotations

import base64
import json

import pytest

import jetstream_sync as jss

from test_cli import as_json, cli, fails, ok

pytestmark = pytest.mark.timeout(60)

NS = 1_000_000_000


def test_add_sets_every_flag_given_and_prints_the_stream_info(js, nats_server):
    doc = as_json(cli("stream", "add", "CLI_ADD", "--subjects", "cli.add.a,cli.add.b", "--subjects", "cli.add.c",
                      "--storage", "memory", "--retention", "limits", "--max-msgs", "1000", "--max-bytes", "1MiB",
                      "--max-age", "1h", "--max-msg-size", "1KB", "--max-msgs-per-subject", "10",
                      "--discard", "new", "--dupe-window", "2m", "--description", "from the cli",
                      "--allow-rollup", "--deny-delete", "--no-deny-purge", "--metadata", "team=billing",
                      "--json", server=nats_server))
    cfg = doc["config"]
    assert cfg["name"] == "CLI_ADD"
    assert cfg["subjects"] == ["cli.add.a", "cli.add.b", "cli.add.c"]
    assert (cfg["storage"], cfg["retention"], cfg["discard"]) == ("memory", "limits", "new")
    assert (cfg["max_msgs"], cfg["max_bytes"], cfg["max_msg_size"], cfg["max_msgs_per_subject"]) == \
        (1000, 1024 * 1024, 1000, 10)
    assert (cfg["max_age"], cfg["duplicate_window"]) == (3600 * NS, 120 * NS)
    assert (cfg["allow_rollup_hdrs"], cfg["deny_delete"], cfg["deny_purge"]) == (True, True, False)
    assert cfg["description"] == "from the cli" and cfg["metadata"]["team"] == "billing"
    assert doc["state"]["messages"] == 0
    info = js.stream_info("CLI_ADD")  # what the server really has
    assert info.config.max_age == 3600.0 and info.config.max_bytes == 1024 * 1024

    human = ok(cli("stream", "add", "CLI_ADD2", "--subjects", "cli.add2", "--storage", "memory", server=nats_server))
    assert human.startswith("created stream CLI_ADD2\n")
    assert "Subjects:" in human and "cli.add2" in human and "Storage:              memory" in human


def test_add_takes_a_json_config_file_and_flags_override_it(js, nats_server, tmp_path):
    config = tmp_path / "orders.json"
    config.write_text(json.dumps({"name": "CLI_FILE", "subjects": ["cli.file.>"], "storage": "memory",
                                  "max_age": 60 * NS, "max_msgs": 5}))
    doc = as_json(cli("stream", "add", "--config", str(config), "--max-msgs", "7", "--json", server=nats_server))
    assert doc["config"]["name"] == "CLI_FILE"
    assert (doc["config"]["max_age"], doc["config"]["max_msgs"]) == (60 * NS, 7)
    # A whole `stream info --json` document works as a config too (its "config" part is used).
    info_file = tmp_path / "info.json"
    info_file.write_text(ok(cli("stream", "info", "CLI_FILE", "--json", server=nats_server)))
    copy = as_json(cli("stream", "add", "CLI_FILE2", "--config", str(info_file), "--subjects", "cli.file2",
                       "--json", server=nats_server))
    assert (copy["config"]["name"], copy["config"]["max_msgs"]) == ("CLI_FILE2", 7)
    config.write_text("{not json")
    fails(cli("stream", "add", "--config", str(config), server=nats_server), 2, "--config: .* is not valid JSON")


def test_ls_shows_a_table_names_and_json(js, nats_server):
    js.create_stream(name="CLI_LS_A", subjects=["cli.ls.a"], storage="memory")
    js.create_stream(name="CLI_LS_B", subjects=["cli.ls.b"], storage="memory")
    js.publish("cli.ls.b", b"x")
    table = ok(cli("stream", "ls", server=nats_server)).splitlines()
    assert table[0].split()[:3] == ["NAME", "SUBJECTS", "STORAGE"]
    row = next(line.split() for line in table if line.startswith("CLI_LS_B"))
    assert row[:5] == ["CLI_LS_B", "cli.ls.b", "memory", "1", "1"]
    assert as_json(cli("stream", "ls", "--names", "--json", server=nats_server)) == ["CLI_LS_A", "CLI_LS_B"]
    docs = as_json(cli("stream", "ls", "--subject", "cli.ls.a", "--json", server=nats_server))
    assert [d["config"]["name"] for d in docs] == ["CLI_LS_A"]


def test_info_shows_config_and_state_and_a_missing_stream_exits_3(js, nats_server):
    js.create_stream(name="CLI_INFO", subjects=["cli.info"], storage="memory", max_age=90.0)
    js.publish("cli.info", b"hello")
    human = ok(cli("stream", "info", "CLI_INFO", server=nats_server))
    assert "Max age:              1m30s" in human
    assert "Messages:         1" in human
    doc = as_json(cli("--json", "stream", "info", "CLI_INFO", server=nats_server))
    assert doc["config"]["max_age"] == 90 * NS and doc["state"]["last_seq"] == 1
    fails(cli("stream", "info", "CLI_NOPE", server=nats_server), 3, "stream 'CLI_NOPE' not found")


def test_edit_changes_only_the_flags_given(js, nats_server):
    js.create_stream(name="CLI_EDIT", subjects=["cli.edit"], storage="memory", max_age=3600.0,
                     description="keep me", max_msgs=100)
    doc = as_json(cli("stream", "edit", "CLI_EDIT", "--max-msgs", "500", "--subjects", "cli.edit,cli.edit2",
                      "--json", "-f", server=nats_server))
    assert doc["config"]["max_msgs"] == 500
    cfg = js.stream_info("CLI_EDIT").config
    assert (cfg.max_msgs, cfg.subjects) == (500, ["cli.edit", "cli.edit2"])
    assert (cfg.description, cfg.max_age, str(cfg.storage)) == ("keep me", 3600.0, "memory")
    human = ok(cli("stream", "edit", "CLI_EDIT", "--description", "changed", "--force", server=nats_server))
    assert human.startswith("updated stream CLI_EDIT\n")
    assert js.stream_info("CLI_EDIT").config.max_msgs == 500
    fails(cli("stream", "edit", "CLI_EDIT", server=nats_server), 2, "nothing to change")
    fails(cli("stream", "edit", "CLI_EDIT", "--storage", "file", "-f", server=nats_server), 1, "(?i)storage")
    fails(cli("stream", "edit", "CLI_NOPE", "--max-msgs", "1", "-f", server=nats_server), 3, "not found")


def test_edit_without_a_terminal_needs_f_and_changes_nothing_without_it(js, nats_server):
    js.create_stream(name="CLI_EDIT_F", subjects=["cli.editf"], storage="memory", max_msgs=100)
    fails(cli("stream", "edit", "CLI_EDIT_F", "--max-msgs", "5", server=nats_server), 2,
          "edit stream CLI_EDIT_F needs confirming.*give -f")
    assert js.stream_info("CLI_EDIT_F").config.max_msgs == 100


def test_cp_creates_a_stream_with_the_source_config_and_the_overrides(js, nats_server):
    js.create_stream(name="CLI_CP_SRC", subjects=["cli.cp.src"], storage="memory", max_msgs=42,
                     description="original")
    js.publish("cli.cp.src", b"not copied")
    doc = as_json(cli("stream", "cp", "CLI_CP_SRC", "CLI_CP_DST", "--subjects", "cli.cp.dst", "--json",
                      server=nats_server))
    assert doc["config"]["name"] == "CLI_CP_DST"
    dst = js.stream_info("CLI_CP_DST")
    assert (dst.config.subjects, dst.config.max_msgs, dst.config.description) == (["cli.cp.dst"], 42, "original")
    assert dst.state.messages == 0
    assert js.stream_info("CLI_CP_SRC").config.subjects == ["cli.cp.src"]
    fails(cli("stream", "cp", "CLI_CP_NOPE", "CLI_CP_X", server=nats_server), 3, "not found")


def test_purge_by_subject_by_keep_and_by_sequence(js, nats_server):
    js.create_stream(name="CLI_PURGE", subjects=["cli.purge.*"], storage="memory")
    for i in range(10):
        js.publish(f"cli.purge.{'a' if i % 2 else 'b'}", b"%d" % i)
    assert ok(cli("stream", "purge", "CLI_PURGE", "-f", "--subject", "cli.purge.a", server=nats_server)) == \
        "purged 5 messages from stream CLI_PURGE\n"
    assert as_json(cli("stream", "purge", "CLI_PURGE", "-f", "--keep", "2", "--json", server=nats_server)) == \
        {"stream": "CLI_PURGE", "purged": 3}
    assert as_json(cli("stream", "purge", "CLI_PURGE", "-f", "--seq", "9", "--json", server=nats_server))["purged"] == 1
    assert js.stream_info("CLI_PURGE").state.messages == 1


def test_get_prints_a_message_by_sequence_or_last_for_subject(js, nats_server):
    js.create_stream(name="CLI_GET", subjects=["cli.get.*"], storage="memory")
    js.publish("cli.get.text", "héllo", headers={"X-Trace": ["a", "b"]})
    js.publish("cli.get.bin", b"\xff\x00\x01")
    js.publish("cli.get.text", b"second")
    doc = as_json(cli("stream", "get", "CLI_GET", "1", "--json", server=nats_server))
    assert (doc["stream"], doc["seq"], doc["subject"]) == ("CLI_GET", 1, "cli.get.text")
    assert (doc["data"], doc["data_encoding"], doc["headers"]) == ("héllo", "utf-8", {"X-Trace": ["a", "b"]})
    assert doc["time"].endswith("Z")
    binary = as_json(cli("stream", "get", "CLI_GET", "2", "--json", server=nats_server))
    assert binary["data_encoding"] == "base64" and base64.b64decode(binary["data"]) == b"\xff\x00\x01"
    human = ok(cli("stream", "get", "CLI_GET", "--last-for", "cli.get.text", server=nats_server))
    assert human.startswith("[CLI_GET #3] cli.get.text")
    assert "\nsecond\n" in human
    fails(cli("stream", "get", "CLI_GET", "99", server=nats_server), 3, "no message at sequence 99")
    fails(cli("stream", "get", "CLI_GET", "--last-for", "cli.get.none", server=nats_server), 3, "no message on")



def json_lines(proc) -> list:
    return [json.loads(line) for line in ok(proc).splitlines()]


def test_get_batch_prints_many_messages_as_json_lines_from_a_sequence_or_on_a_subject(js, nats_server):
    js.create_stream(name="CLI_BATCH", subjects=["cli.batch.*"], storage="memory", allow_direct=True)
    for i in range(6):
        js.publish(f"cli.batch.{'ab'[i % 2]}", f"m{i}", headers={"N": str(i)} if i == 1 else None)
    docs = json_lines(cli("stream", "get", "CLI_BATCH", "--batch", "4", "--json", server=nats_server))
    assert [(d["stream"], d["seq"], d["subject"], d["data"]) for d in docs] == [
        ("CLI_BATCH", 1, "cli.batch.a", "m0"), ("CLI_BATCH", 2, "cli.batch.b", "m1"),
        ("CLI_BATCH", 3, "cli.batch.a", "m2"), ("CLI_BATCH", 4, "cli.batch.b", "m3")]
    assert docs[1]["headers"] == {"N": ["1"]} and docs[0]["headers"] == {}
    assert docs[0]["time"] == jss.config.format_time(js.stream("CLI_BATCH").get_msg(1).time)  # the server's text
    by_subject = json_lines(cli("stream", "get", "CLI_BATCH", "3", "--batch", "10", "--subject", "cli.batch.b",
                                "--json", server=nats_server))
    assert [d["seq"] for d in by_subject] == [4, 6]
    assert [d["seq"] for d in json_lines(cli("stream", "get", "CLI_BATCH", "--batch", "2", "--seq", "5", "--json",
                                             server=nats_server))] == [5, 6]
    human = ok(cli("stream", "get", "CLI_BATCH", "--batch", "2", "--seq", "2", server=nats_server))
    assert human.startswith("[CLI_BATCH #2] cli.batch.b") and "N: 1" in human and "[CLI_BATCH #3] cli.batch.a" in human
    fails(cli("stream", "get", "CLI_BATCH", "--batch", "5", "--seq", "7", server=nats_server), 3,
          "no messages from sequence 7 in stream 'CLI_BATCH'")


def test_get_last_for_several_subjects_prints_the_last_of_each(js, nats_server):
    js.create_stream(name="CLI_LAST", subjects=["cli.last.*"], storage="memory", allow_direct=True)
    for s in ("a", "b", "a", "c"):
        js.publish(f"cli.last.{s}", s)
    docs = json_lines(cli("stream", "get", "CLI_LAST", "--last-for", "cli.last.a", "cli.last.b", "--json",
                          server=nats_server))
    assert [(d["seq"], d["subject"]) for d in docs] == [(2, "cli.last.b"), (3, "cli.last.a")]
    docs = json_lines(cli("stream", "get", "CLI_LAST", "--last-for", "cli.last.*", "--batch", "2", "--json",
                          server=nats_server))
    assert [d["seq"] for d in docs] == [2, 3]
    one = as_json(cli("stream", "get", "CLI_LAST", "--last-for", "cli.last.a", "--json", server=nats_server))
    assert one["seq"] == 3  # one subject without --batch: the single get, as before
    fails(cli("stream", "get", "CLI_LAST", "--last-for", "cli.last.x", "cli.last.y", server=nats_server), 3,
          "no messages on 'cli.last.x', 'cli.last.y'")


def test_get_batch_usage_and_a_stream_without_direct_gets(js, nats_server):
    js.create_stream(name="CLI_NODIRECT", subjects=["cli.nodirect"], storage="memory")
    js.publish("cli.nodirect", b"x")
    fails(cli("stream", "get", "CLI_NODIRECT", "--batch", "5", server=nats_server), 1,
          "does not allow direct gets.*stream edit CLI_NODIRECT --allow-direct")
    fails(cli("stream", "get", "CLI_NODIRECT", "--subject", "cli.nodirect", server=nats_server), 2,
          "--seq and --subject go with --batch")
    fails(cli("stream", "get", "CLI_NODIRECT", "1", "--seq", "1", "--batch", "2", server=nats_server), 2,
          "as SEQ or as --seq")
    fails(cli("stream", "get", "CLI_NODIRECT", "--last-for", "a", "--subject", "b", "--batch", "2",
              server=nats_server), 2, "--last-for reads the last message")
    fails(cli("stream", "get", "CLI_NODIRECT", "--batch", "0", server=nats_server), 2, "--batch")

def test_rmm_deletes_one_message_and_a_missing_one_exits_3(js, nats_server):
    js.create_stream(name="CLI_RMM", subjects=["cli.rmm"], storage="memory")
    for _ in range(3):
        js.publish("cli.rmm", b"x")
    assert ok(cli("stream", "rmm", "CLI_RMM", "-f", "2", server=nats_server)) == "deleted message 2 from stream CLI_RMM\n"
    with pytest.raises(jss.MessageNotFoundError):
        js.stream("CLI_RMM").get_msg(2)
    fails(cli("stream", "rmm", "CLI_RMM", "-f", "2", server=nats_server), 3, "no message 2 in stream 'CLI_RMM'")
    assert as_json(cli("stream", "rmm", "CLI_RMM", "-f", "3", "--erase", "--json", server=nats_server))["deleted"] is True


def test_rm_refuses_without_a_terminal_deletes_with_f_and_a_missing_stream_exits_3(js, nats_server):
    js.create_stream(name="CLI_RM", subjects=["cli.rm"], storage="memory")
    fails(cli("stream", "rm", "CLI_RM", server=nats_server, input=""), 2, "no terminal to ask on: give -f")
    assert "CLI_RM" in list(js.stream_names())
    assert ok(cli("stream", "rm", "CLI_RM", "-f", server=nats_server, input="")) == "deleted stream CLI_RM\n"
    assert "CLI_RM" not in list(js.stream_names())
    fails(cli("stream", "rm", "CLI_RM", "-f", server=nats_server), 3, "stream 'CLI_RM' not found")
