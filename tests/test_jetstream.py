# Charter: the JetStream context against a real nats-server: stream CRUD and
# listing (with paging past the server's page size), consumer CRUD by
# (stream, name), account info, domains and API prefixes, and argument
# checks that must fail before anything reaches the server (seen by a spy).
from __future__ import annotations

import re
import time
from pathlib import Path

import attrs
import pytest

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

from conftest import assert_sends_nothing, wait_for

BAD_NAMES = ["has space", "has.dot", "star*", "gt>"]


def test_the_api_spy_sees_a_request_that_is_sent(js, api_spy):
    # The negative checks below rely on the spy; prove it can see a request.
    mark = api_spy.mark(js)
    with pytest.raises(jss.StreamNotFoundError):
        js.stream("SPYTEST")
    api_spy.sync(js)
    assert api_spy.since(mark)[0] == "$JS.API.STREAM.INFO.SPYTEST"


# --- creating streams ----------------------------------------------------------


def test_create_stream_from_a_config_object_returns_a_handle_with_the_servers_config(js):
    cfg = jss.StreamConfig(name="CFGOBJ", subjects=["cfgobj.>"], storage=jss.StorageType.MEMORY, max_msgs=100)
    stream = js.create_stream(cfg)
    assert isinstance(stream, jss.Stream)
    assert stream.name == "CFGOBJ"
    got = stream.cached_info.config
    assert (got.subjects, got.storage, got.max_msgs) == (["cfgobj.>"], jss.StorageType.MEMORY, 100)
    # server defaults are filled in
    assert got.retention is jss.RetentionPolicy.LIMITS
    assert js.stream("CFGOBJ").cached_info.config.max_msgs == 100


def test_create_stream_from_a_dict(js):
    stream = js.create_stream({"name": "FROMDICT", "subjects": ["fromdict.*"], "storage": "memory",
                               "max_age": 60})
    got = js.stream("FROMDICT").info().config
    assert stream.name == "FROMDICT"
    assert (got.subjects, got.storage, got.max_age) == (["fromdict.*"], jss.StorageType.MEMORY, 60.0)


def test_create_stream_from_keyword_fields(js):
    stream = js.create_stream(name="KW", subjects=["kw.a", "kw.b"], storage="memory", description="by keywords")
    got = stream.info().config
    assert (got.name, got.subjects, got.description) == ("KW", ["kw.a", "kw.b"], "by keywords")


def test_keyword_fields_override_the_config_object(js):
    cfg = jss.StreamConfig(name="OVR", subjects=["ovr.>"], storage="memory", max_msgs=10)
    stream = js.create_stream(cfg, max_msgs=42, description="overridden")
    got = stream.info().config
    assert (got.max_msgs, got.description, got.subjects) == (42, "overridden", ["ovr.>"])
    assert cfg.max_msgs == 10  # the caller's object is untouched


def test_creating_the_same_stream_again_is_not_an_error(js):
    js.create_stream(name="AGAIN", subjects=["again"], storage="memory")
    assert js.create_stream(name="AGAIN", subjects=["again"], storage="memory").name == "AGAIN"


def test_creating_a_stream_whose_name_is_taken_with_another_config_raises_stream_name_in_use(js):
    js.create_stream(name="TAKEN", subjects=["taken.a"], storage="memory")
    with pytest.raises(jss.StreamNameInUseError) as info:
        js.create_stream(name="TAKEN", subjects=["taken.b"], storage="memory")
    assert info.value.err_code == 10058
    assert js.stream("TAKEN").info().config.subjects == ["taken.a"]


# --- updating, looking up and deleting streams ---------------------------------------


def test_update_stream_changes_the_config(js):
    js.create_stream(name="UPD", subjects=["upd.a"], storage="memory")
    stream = js.update_stream(name="UPD", subjects=["upd.a", "upd.b"], storage="memory", max_msgs=7)
    assert stream.cached_info.config.subjects == ["upd.a", "upd.b"]
    assert js.stream("UPD").info().config.max_msgs == 7


def test_update_stream_of_a_missing_stream_raises_stream_not_found(js):
    with pytest.raises(jss.StreamNotFoundError):
        js.update_stream(name="NOSUCH", subjects=["nosuch"], storage="memory")
    with pytest.raises(jss.StreamNotFoundError):
        js.stream("NOSUCH")


def test_create_or_update_stream_creates_a_missing_stream(js, api_spy):
    mark = api_spy.mark(js)
    stream = js.create_or_update_stream(name="COU", subjects=["cou.a"], storage="memory")
    api_spy.sync(js)
    assert stream.info().config.subjects == ["cou.a"]
    assert api_spy.since(mark)[:2] == ["$JS.API.STREAM.UPDATE.COU", "$JS.API.STREAM.CREATE.COU"]


def test_create_or_update_stream_updates_an_existing_stream(js, api_spy):
    js.create_stream(name="COU2", subjects=["cou2.a"], storage="memory")
    mark = api_spy.mark(js)
    stream = js.create_or_update_stream(name="COU2", subjects=["cou2.a", "cou2.b"], storage="memory")
    api_spy.sync(js)
    assert stream.info().config.subjects == ["cou2.a", "cou2.b"]
    assert "$JS.API.STREAM.CREATE.COU2" not in api_spy.since(mark)


def test_stream_looks_a_stream_up_and_raises_stream_not_found_for_a_missing_one(js):
    js.create_stream(name="LOOK", subjects=["look"], storage="memory")
    stream = js.stream("LOOK")
    assert isinstance(stream, jss.Stream)
    assert (stream.name, stream.cached_info.config.subjects) == ("LOOK", ["look"])
    with pytest.raises(jss.StreamNotFoundError) as info:
        js.stream("LOOK2")
    assert (info.value.code, info.value.err_code) == (404, 10059)
    assert isinstance(info.value, jss.APIError)


def test_delete_stream_removes_it_and_a_second_delete_raises_stream_not_found(js):
    js.create_stream(name="GONE", subjects=["gone"], storage="memory")
    assert js.delete_stream("GONE") is None
    with pytest.raises(jss.StreamNotFoundError):
        js.stream("GONE")
    with pytest.raises(jss.StreamNotFoundError):
        js.delete_stream("GONE")


def test_info_config_evolve_update_round_trip_keeps_every_other_field(js):
    js.create_stream(name="ROUND", subjects=["round.>"], storage="memory", description="kept",
                     metadata={"team": "billing"}, max_msgs=10, max_age=3600, duplicate_window=60)
    before = js.stream("ROUND").info().config
    after = js.update_stream(attrs.evolve(before, max_msgs=20)).info().config
    assert after.max_msgs == 20
    assert after.description == "kept"
    assert after.metadata["team"] == "billing"
    assert (after.max_age, after.duplicate_window) == (3600.0, 60.0)
    assert attrs.evolve(after, max_msgs=10) == before


# --- listing streams --------------------------------------------------------------


def test_streams_and_stream_names_list_every_stream(js):
    for name in ("LA", "LB", "LC"):
        js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="memory")
    infos = list(js.streams())
    assert sorted(i.config.name for i in infos) == ["LA", "LB", "LC"]
    assert all(isinstance(i, jss.StreamInfo) for i in infos)
    assert sorted(js.stream_names()) == ["LA", "LB", "LC"]


def test_streams_and_stream_names_filtered_by_subject_list_only_the_streams_capturing_it(js):
    js.create_stream(name="FA", subjects=["fa.>"], storage="memory")
    js.create_stream(name="FB", subjects=["fb.>"], storage="memory")
    assert [i.config.name for i in js.streams(subject="fa.x")] == ["FA"]
    assert list(js.stream_names(subject="fb.y")) == ["FB"]
    assert list(js.stream_names(subject="nobody.here")) == []
    assert list(js.streams(subject="nobody.here")) == []


def test_listing_with_no_streams_yields_nothing(js):
    assert list(js.streams()) == []
    assert list(js.stream_names()) == []


@pytest.mark.timeout(60)
def test_streams_and_stream_names_page_past_the_servers_pages_of_256_and_1024(js, api_spy):
    names = {f"PAGE{i:04d}" for i in range(1030)}
    for name in names:
        js.create_stream(name=name, subjects=[f"page.{name}"], storage="memory")
    mark = api_spy.mark(js)
    infos = list(js.streams())
    listed = list(js.stream_names())
    api_spy.sync(js)
    assert len(infos) == len(listed) == 1030
    assert {i.config.name for i in infos} == set(listed) == names
    sent = api_spy.since(mark)
    assert sent.count("$JS.API.STREAM.LIST") == 5  # 1030 = 4 x 256 + 6
    assert sent.count("$JS.API.STREAM.NAMES") == 2  # 1030 = 1024 + 6


# --- consumers by (stream, name) --------------------------------------------------


@pytest.fixture
def orders(js):
    return js.create_stream(name="ORDERS", subjects=["orders.>"], storage="memory")


def test_create_consumer_with_a_durable_name_makes_a_durable_consumer(js, orders):
    consumer = js.create_consumer("ORDERS", durable_name="dur")
    assert isinstance(consumer, jss.Consumer)
    assert (consumer.name, consumer.stream_name) == ("dur", "ORDERS")
    cfg = consumer.cached_info.config
    assert cfg.durable_name == "dur"
    assert cfg.inactive_threshold is None  # durable: never removed for inactivity
    assert js.consumer("ORDERS", "dur").name == "dur"


def test_create_consumer_with_a_name_makes_a_consumer_found_by_that_name(js, orders):
    consumer = js.create_consumer("ORDERS", name="named")
    assert consumer.name == "named"
    assert js.consumer("ORDERS", "named").cached_info.config.name == "named"


def test_create_consumer_without_a_name_makes_an_ephemeral_consumer_with_a_server_chosen_name(js, orders):
    consumer = js.create_consumer("ORDERS")
    assert consumer.name
    assert consumer.cached_info.config.durable_name is None
    assert consumer.cached_info.config.inactive_threshold > 0
    assert js.consumer("ORDERS", consumer.name).name == consumer.name


def test_create_consumer_defaults_to_explicit_acks_as_nats_go_does(js, orders):
    assert js.create_consumer("ORDERS", durable_name="acks").cached_info.config.ack_policy is jss.AckPolicy.EXPLICIT
    none = js.create_consumer("ORDERS", durable_name="noacks", ack_policy="none")
    assert none.cached_info.config.ack_policy is jss.AckPolicy.NONE


def test_create_consumer_with_filter_subject_and_with_filter_subjects(js, orders):
    one = js.create_consumer("ORDERS", durable_name="one", filter_subject="orders.new")
    many = js.create_consumer("ORDERS", durable_name="many", filter_subjects=["orders.new", "orders.paid"])
    wild = js.create_consumer("ORDERS", durable_name="wild", filter_subject="orders.>")
    assert js.consumer("ORDERS", "one").cached_info.config.filter_subject == "orders.new"
    assert many.info().config.filter_subjects == ["orders.new", "orders.paid"]
    assert wild.info().config.filter_subject == "orders.>"
    js.publish("orders.new", b"1")
    js.publish("orders.paid", b"2")
    js.publish("orders.shipped", b"3")
    assert (one.info().num_pending, many.info().num_pending, wild.info().num_pending) == (1, 2, 3)


def test_create_consumer_from_a_config_object_or_a_dict(js, orders):
    cfg = jss.ConsumerConfig(durable_name="fromcfg", description="object")
    assert js.create_consumer("ORDERS", cfg).cached_info.config.description == "object"
    c = js.create_consumer("ORDERS", {"durable_name": "fromdict", "max_deliver": 3}, description="dict")
    assert (c.cached_info.config.max_deliver, c.cached_info.config.description) == (3, "dict")


def test_creating_an_existing_consumer_with_another_config_raises_consumer_exists(js, orders):
    js.create_consumer("ORDERS", durable_name="exists", description="first")
    # the same config again is fine
    js.create_consumer("ORDERS", durable_name="exists", description="first")
    with pytest.raises(jss.ConsumerExistsError) as info:
        js.create_consumer("ORDERS", durable_name="exists", description="second")
    assert info.value.err_code in (10148, 10105)
    assert js.consumer("ORDERS", "exists").cached_info.config.description == "first"


def test_update_consumer_changes_the_config(js, orders):
    js.create_consumer("ORDERS", durable_name="upd", description="before")
    consumer = js.update_consumer("ORDERS", durable_name="upd", description="after", max_ack_pending=5)
    assert consumer.cached_info.config.description == "after"
    assert js.consumer("ORDERS", "upd").cached_info.config.max_ack_pending == 5


def test_update_consumer_of_a_missing_consumer_raises_consumer_not_found(js, orders):
    with pytest.raises(jss.ConsumerNotFoundError):
        js.update_consumer("ORDERS", durable_name="missing", description="x")
    with pytest.raises(jss.ConsumerNotFoundError):
        js.consumer("ORDERS", "missing")


def test_create_or_update_consumer_creates_then_updates(js, orders):
    created = js.create_or_update_consumer("ORDERS", durable_name="cou", description="v1")
    assert created.cached_info.config.description == "v1"
    updated = js.create_or_update_consumer("ORDERS", durable_name="cou", description="v2")
    assert updated.cached_info.config.description == "v2"
    assert js.consumer("ORDERS", "cou").cached_info.config.description == "v2"


def test_consumer_on_a_missing_stream_raises_stream_not_found(js):
    with pytest.raises(jss.StreamNotFoundError):
        js.consumer("NOSTREAM", "c")
    with pytest.raises(jss.StreamNotFoundError):
        js.create_consumer("NOSTREAM", durable_name="c")


def test_delete_consumer_removes_it_and_a_second_delete_raises_consumer_not_found(js, orders):
    js.create_consumer("ORDERS", durable_name="del")
    assert js.delete_consumer("ORDERS", "del") is None
    with pytest.raises(jss.ConsumerNotFoundError):
        js.consumer("ORDERS", "del")
    with pytest.raises(jss.ConsumerNotFoundError):
        js.delete_consumer("ORDERS", "del")


def test_consumers_and_consumer_names_list_every_consumer(js, orders):
    for name in ("ca", "cb"):
        js.create_consumer("ORDERS", durable_name=name)
    assert sorted(i.name for i in js.consumers("ORDERS")) == ["ca", "cb"]
    assert all(isinstance(i, jss.ConsumerInfo) for i in js.consumers("ORDERS"))
    assert sorted(js.consumer_names("ORDERS")) == ["ca", "cb"]


@pytest.mark.timeout(60)
def test_consumers_pages_past_the_servers_page_of_256(js, orders, api_spy):
    names = {f"c{i:03d}" for i in range(260)}
    for name in names:
        js.create_consumer("ORDERS", durable_name=name, mem_storage=True)
    mark = api_spy.mark(js)
    infos = list(js.consumers("ORDERS"))
    api_spy.sync(js)
    assert {i.name for i in infos} == names and len(infos) == 260
    assert api_spy.since(mark).count("$JS.API.CONSUMER.LIST.ORDERS") == 2
    assert set(js.consumer_names("ORDERS")) == names


# --- account info ---------------------------------------------------------------------


def test_account_info_counts_streams_consumers_and_api_requests(js):
    before = js.account_info()
    assert isinstance(before, jss.AccountInfo)
    js.create_stream(name="ACC", subjects=["acc"], storage="memory")
    js.create_consumer("ACC", durable_name="acc")
    js.publish("acc", b"12345")
    after = js.account_info()
    assert (after.streams, after.consumers) == (before.streams + 1, before.consumers + 1)
    assert after.memory > before.memory
    assert after.api.total >= before.api.total + 2
    assert after.limits.max_streams == -1


# --- domains and API prefixes -------------------------------------------------------


class TraceLog:
    """The subjects one client published, read from the server's trace log (``-V``).

    The trace shows subjects as the client sent them, before the server maps
    ``$JS.<domain>.API.>`` onto ``$JS.API.>``.
    """

    _PUB = re.compile(r"<<- \[H?PUB (\S+) ")

    def __init__(self, server: NatsServer, client_name: str) -> None:
        self._path = Path(server.log_path)
        self._tag = f':{client_name}" - <<- ['

    def published(self) -> list[str]:
        out = []
        for line in self._path.read_text(errors="replace").splitlines():
            if self._tag in line:
                m = self._PUB.search(line)
                if m:
                    out.append(m.group(1))
        return out


@pytest.fixture(scope="module")
def hub_server():
    with NatsServer(config_text="jetstream { domain: hub }\n", args=["-V"]) as server:
        yield server


def _hub_client_name(request) -> str:
    return f"hub-{request.node.name}"


@pytest.fixture
def hub_trace(hub_server, request):
    return TraceLog(hub_server, _hub_client_name(request))


@pytest.fixture
def hub_client(hub_server, request):
    client = jss.connect(hub_server.url, name=_hub_client_name(request))
    yield client
    if not client.is_closed:
        ctx = client.jetstream(domain="hub")
        for stream in list(ctx.stream_names()):
            ctx.delete_stream(stream)
    client.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["domain", "api_prefix"])
def test_a_domain_or_api_prefix_is_honoured_by_every_request_direct_get_included(hub_client, hub_trace, how):
    js = hub_client.jetstream(domain="hub") if how == "domain" else hub_client.jetstream(api_prefix="$JS.hub.API")
    assert js.account_info().domain == "hub"
    stream = js.create_stream(name="HUB", subjects=["hub.>"], storage="memory", allow_direct=True)
    ack = js.publish("hub.a", b"payload", headers={"K": "v"})
    assert (ack.stream, ack.seq, ack.domain) == ("HUB", 1, "hub")
    assert js.stream("HUB").info().state.messages == 1
    consumer = js.create_consumer("HUB", durable_name="hubc")
    assert js.consumer("HUB", "hubc").info().num_pending == 1
    msgs = list(consumer.fetch(max_messages=1, expires=5))
    assert [(m.subject, m.data) for m in msgs] == [("hub.a", b"payload")]
    got = stream.get_msg(1)
    assert (got.data, got.headers["K"]) == (b"payload", "v")
    assert stream.get_last_msg("hub.a").seq == 1
    assert [s.config.name for s in js.streams()] == ["HUB"]
    js.delete_consumer("HUB", "hubc")
    js.account_info()  # the last request: once the trace shows it, it shows everything before
    wait_for(lambda: hub_trace.published()[-1:] == ["$JS.hub.API.INFO"], what="the trace of the last request")
    api = [s for s in hub_trace.published() if s.startswith("$JS.") and not s.startswith("$JS.ACK.")]
    assert all(s.startswith("$JS.hub.API.") for s in api), api
    for expected in ("STREAM.CREATE.HUB", "STREAM.INFO.HUB", "CONSUMER.CREATE.HUB.hubc", "CONSUMER.INFO.HUB.hubc",
                     "CONSUMER.MSG.NEXT.HUB.hubc", "DIRECT.GET.HUB", "STREAM.LIST", "CONSUMER.DELETE.HUB.hubc"):
        assert f"$JS.hub.API.{expected}" in api


@pytest.mark.timeout(30)
def test_an_unknown_domain_raises_jetstream_not_enabled_promptly(hub_client):
    js = hub_client.jetstream(domain="other", timeout=10.0)
    start = time.monotonic()
    with pytest.raises(jss.JetStreamNotEnabledError, match=r"\$JS\.other\.API"):
        js.account_info()
    # Retried (no responders may be a leader election) but never waiting for the 10 s timeout.
    assert time.monotonic() - start < 4.0
    start = time.monotonic()
    with pytest.raises(jss.JetStreamNotEnabledError):
        js.create_stream(name="X", subjects=["x"])
    assert time.monotonic() - start < 4.0
    assert isinstance(jss.JetStreamNotEnabledError("x"), jss.NoRespondersError)


def test_domain_and_api_prefix_together_is_a_value_error(client):
    with pytest.raises(ValueError, match="domain.*api_prefix"):
        client.jetstream(domain="hub", api_prefix="$JS.hub.API")


@pytest.mark.timeout(30)
def test_a_server_without_jetstream_raises_jetstream_not_enabled():
    with NatsServer(jetstream=False) as server, jss.connect(server.url) as client:
        js = client.jetstream(timeout=30.0)
        start = time.monotonic()
        with pytest.raises(jss.JetStreamNotEnabledError):
            js.account_info()
        with pytest.raises(jss.JetStreamNotEnabledError):
            js.create_stream(name="S", subjects=["s"])
        with pytest.raises(jss.JetStreamNotEnabledError):
            list(js.stream_names())
        assert time.monotonic() - start < 8.0  # no request waited for its 30 s timeout


# --- bad input fails before anything is sent -------------------------------------------


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_stream_names_are_refused_before_anything_is_sent(js, api_spy, name):
    assert_sends_nothing(api_spy, js, lambda: js.create_stream(name=name, subjects=["bad"]), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.update_stream(name=name, subjects=["bad"]), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.create_or_update_stream(name=name), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.stream(name), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.delete_stream(name), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.create_consumer(name, durable_name="c"), ValueError, "stream")
    assert_sends_nothing(api_spy, js, lambda: js.consumer(name, "c"), ValueError, "stream")
    assert_sends_nothing(api_spy, js, lambda: js.delete_consumer(name, "c"), ValueError, "stream")
    assert_sends_nothing(api_spy, js, lambda: list(js.consumers(name)), ValueError, "stream")


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_consumer_names_are_refused_before_anything_is_sent(js, api_spy, name):
    assert_sends_nothing(api_spy, js, lambda: js.create_consumer("S", durable_name=name), ValueError, "durable_name")
    assert_sends_nothing(api_spy, js, lambda: js.create_consumer("S", name=name), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.consumer("S", name), ValueError, "name")
    assert_sends_nothing(api_spy, js, lambda: js.delete_consumer("S", name), ValueError, "name")


@pytest.mark.parametrize("field, value", [
    ("max_msgs", -2), ("max_bytes", -5), ("max_consumers", -3), ("max_msgs_per_subject", -2),
    ("max_msg_size", -2), ("max_age", -1), ("duplicate_window", -0.5), ("num_replicas", 0),
])
def test_negative_stream_limits_are_refused_before_anything_is_sent(js, api_spy, field, value):
    assert_sends_nothing(api_spy, js, lambda: js.create_stream(name="NEG", subjects=["neg"], **{field: value}),
                         ValueError, field)


def test_an_unknown_keyword_field_is_a_type_error_naming_it(js, api_spy):
    assert_sends_nothing(api_spy, js, lambda: js.create_stream(name="UNK", colour="red"), TypeError, "colour")
    assert_sends_nothing(api_spy, js, lambda: js.create_stream({"name": "UNK", "colour": "red"}), TypeError, "colour")
    assert_sends_nothing(api_spy, js, lambda: js.update_stream(name="UNK", colour="red"), TypeError, "colour")
    assert_sends_nothing(api_spy, js, lambda: js.create_consumer("UNK", durable_name="c", colour="red"),
                         TypeError, "colour")
    assert_sends_nothing(api_spy, js, lambda: js.create_stream(name="UNK", subjects="unk.>"), TypeError, "subjects")


@pytest.mark.parametrize("fields, match", [
    ({"filter_subject": "s.a", "filter_subjects": ["s.b"]}, "filter_subject"),
    ({"name": "a", "durable_name": "b"}, "durable_name"),
    ({"opt_start_seq": 5}, "opt_start_seq"),
    ({"deliver_policy": "by_start_sequence"}, "opt_start_seq"),
    ({"deliver_policy": "by_start_time"}, "opt_start_time"),
    ({"deliver_policy": "last_per_subject"}, "filter_subject"),
    ({"ack_policy": "none", "ack_wait": 5}, "ack_wait"),
    ({"max_deliver": 2, "backoff": [1, 2, 3]}, "backoff"),
    ({"max_deliver": 0}, "max_deliver"),
    ({"ack_policy": "sometimes"}, "ack_policy"),
    ({"ack_wait": -1}, "ack_wait"),
    ({"max_ack_pending": -2}, "max_ack_pending"),
])
def test_bad_consumer_configs_are_refused_before_anything_is_sent(js, api_spy, fields, match):
    assert_sends_nothing(api_spy, js, lambda: js.create_consumer("S", **fields), ValueError, match)
    assert_sends_nothing(api_spy, js, lambda: js.create_or_update_consumer("S", **fields), ValueError, match)


def test_update_consumer_without_a_name_is_a_value_error_before_anything_is_sent(js, api_spy):
    assert_sends_nothing(api_spy, js, lambda: js.update_consumer("S", description="x"), ValueError, "name")


def test_a_bad_subject_filter_for_listing_is_refused_before_anything_is_sent(js, api_spy):
    assert_sends_nothing(api_spy, js, lambda: list(js.streams(subject="has space")), ValueError, "subject")
    assert_sends_nothing(api_spy, js, lambda: list(js.stream_names(subject="")), ValueError, "subject")
