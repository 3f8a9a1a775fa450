# Charter: subject filters of batch reads pushed down into the "jetstream" data source (docs/spark.md,
# "Subject filters pushed down"): which filters become NATS subject filters (pure, with PySpark's filter
# classes), and on the session's local Spark against a server of this module with monitoring on: each
# filter shape returns exactly the rows Spark's own filtering returns, on both read transports, the plan
# shows what was pushed, and a filter matching 1 % of a stream reads at least 10x fewer bytes from the
# server than the same query without pushdown (the server's out_bytes: deterministic, unlike time).
from __future__ import annotations

import contextlib
import io
import json
import uuid

import pytest

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    In,
    Not,
    StringContains,
    StringStartsWith,
)

import jetstream_sync as jss
from jetstream_sync._server_os import http_get
from jetstream_sync.server import NatsServer
from jetstream_sync.spark._pushdown import PUSHDOWN_CONF, push

pytestmark = pytest.mark.spark

S = ("subject",)


# -- which filters are pushed (no SparkSession) ------------------------------------------------


def test_equality_in_and_a_prefix_at_a_token_boundary_are_pushed_exactly():
    eq, inn, like = EqualTo(S, "o.eu.1"), In(S, ("o.eu.1", "o.us.2", None, "o.eu.1")), StringStartsWith(S, "o.eu.")
    assert push([eq], None) == (("o.eu.1",), [])
    assert push([inn], None) == (("o.eu.1", "o.us.2"), [])
    assert push([like], None) == (("o.eu.>",), [])
    # Filters on other columns stay with Spark and do not touch the subject filter.
    other = GreaterThan(("seq",), 5)
    assert push([other], None) == (None, [other])
    assert push([other, like], "o.>") == (("o.eu.>",), [other])


def test_a_prefix_not_at_a_token_boundary_narrows_the_read_but_stays_with_spark():
    like = StringStartsWith(S, "o.eu")  # also "o.europe.x" and "o.eu" itself
    assert push([like], None) == (("o.>",), [like])
    no_dot = StringStartsWith(S, "ord")
    assert push([no_dot], None) == (None, [no_dot])


def test_values_that_are_no_storable_subject_are_left_to_spark():
    # SQL compares "o.*" literally; as a NATS filter it would match other subjects.
    for flt in (EqualTo(S, "o.*"), EqualTo(S, "o.>"), EqualTo(S, "a b"), EqualTo(S, ""), EqualTo(S, "o..x"),
                In(S, ("o.a", "o.*")), StringStartsWith(S, "o.*."), Not(EqualTo(S, "o.a")), StringContains(S, "eu"),
                EqualTo(("data",), "o.a")):
        assert push([flt], None) == (None, [flt]), flt


def test_pushed_filters_intersect_each_other_and_the_subject_option():
    eu, a = StringStartsWith(S, "o.eu."), In(S, ("o.eu.1", "o.us.1"))
    assert push([eu, a], None) == (("o.eu.1",), [])
    assert push([EqualTo(S, "o.us.1"), eu], None) == ((), [])  # nothing can match: an empty read
    assert push([eu], "o.*.1") == (None, [eu])  # "o.eu.1" is no filter of either: Spark filters it
    assert push([a], "o.*.1") == (("o.eu.1", "o.us.1"), [])
    assert push([a], "o.eu.>") == (("o.eu.1",), [])
    assert push([eu], "o.>") == (("o.eu.>",), [])
    assert push([StringStartsWith(S, "o.")], "o.eu.>") == (("o.eu.>",), [])
    assert push([EqualTo(S, "x.1")], "o.>") == ((), [])


# -- on Spark ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with NatsServer(monitor=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def mjs(server):
    client = jss.Client(server.url)
    try:
        yield client.jetstream()
    finally:
        client.close()


@pytest.fixture(scope="module")
def pushdown(spark):
    before = spark.conf.get(PUSHDOWN_CONF)
    spark.conf.set(PUSHDOWN_CONF, "true")
    yield spark
    spark.conf.set(PUSHDOWN_CONF, before)


SUBJECTS = ["o.eu.1", "o.eu.2", "o.europe.1", "o.eu", "o.us.1", "o.us.2", "x.eu.1"]


@pytest.fixture(scope="module", params=[False, True], ids=["consumer", "direct"])
def orders(request, mjs):
    """A stream holding 5 messages on each of SUBJECTS (prefixed by the stream name), interleaved."""
    name = f"PD{uuid.uuid4().hex[:8].upper()}"  # no "_": LIKE reads it as a wildcard
    mjs.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=request.param, storage="memory")
    for i in range(5):
        for subject in SUBJECTS:
            mjs.publish_async(f"{name}.{subject}", f"{subject}#{i}".encode())
    mjs.publish_async_complete(timeout=30.0)
    yield name
    mjs.delete_stream(name)


def _load(spark, server, stream, **options):
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _rows(df):
    return sorted((r.subject, r.seq) for r in df.select("subject", "seq").collect())


def _pushed(df) -> str:
    """The ``PushedFilters: [...]`` line of ``df.explain(mode="formatted")`` (none without pushdown)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="formatted")
    return next((line for line in out.getvalue().splitlines() if line.startswith("PushedFilters")), "PushedFilters: []")


#: where clause, what the plan shows as pushed, and which of the stream's (subject, seq) rows it keeps.
CASES = {
    "equality": ("subject = '{n}.o.eu.1'", "[EqualTo(subject,{n}.o.eu.1)]", lambda s, q: s == "o.eu.1"),
    "in": ("subject IN ('{n}.o.eu.1', '{n}.o.us.2', '{n}.nowhere')",
           "[In(subject, [{n}.nowhere,{n}.o.eu.1,{n}.o.us.2])]", lambda s, q: s in ("o.eu.1", "o.us.2")),
    "like at a token boundary": ("subject LIKE '{n}.o.eu.%'", "[StringStartsWith(subject,{n}.o.eu.)]",
                                 lambda s, q: s.startswith("o.eu.")),
    "like inside a token": ("subject LIKE '{n}.o.eu%'", "PushedFilters: []", lambda s, q: s.startswith("o.eu")),
    "with another predicate": ("subject LIKE '{n}.o.%' AND seq > 10 AND data <> X'00'",
                               "StringStartsWith(subject,{n}.o.)", lambda s, q: s.startswith("o.") and q > 10),
    "not pushable": ("subject LIKE '%.eu.%' OR seq = 3", "PushedFilters: []", lambda s, q: ".eu." in f".{s}" or q == 3),
    "contradiction": ("subject = '{n}.o.eu.1' AND subject LIKE '{n}.o.us.%'", "EqualTo(subject,{n}.o.eu.1)",
                      lambda s, q: False),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", list(CASES))
def test_each_filter_shape_returns_exactly_the_rows_it_keeps_and_the_plan_shows_what_was_pushed(
        pushdown, server, orders, case):
    where, shown, keeps = CASES[case]
    df = _load(pushdown, server, orders).where(where.replace("{n}", orders))
    stored = [(subject, i * len(SUBJECTS) + j + 1) for i in range(5) for j, subject in enumerate(SUBJECTS)]
    assert _rows(df) == sorted((f"{orders}.{s}", q) for s, q in stored if keeps(s, q))
    assert shown.replace("{n}", orders) in _pushed(df)


@pytest.mark.timeout(300)
def test_pushed_filters_combine_with_the_subject_option(pushdown, server, orders):
    df = _load(pushdown, server, orders, subject=f"{orders}.o.*.1").where(
        f"subject IN ('{orders}.o.eu.1', '{orders}.o.eu.2', '{orders}.x.eu.1')")
    assert sorted({s for s, _ in _rows(df)}) == [f"{orders}.o.eu.1"]
    assert len(_rows(df)) == 5
    # A partial overlap with the option's wildcard is not pushed: Spark filters, the rows stay right.
    df = _load(pushdown, server, orders, subject=f"{orders}.o.*.1").where(f"subject LIKE '{orders}.o.eu.%'")
    assert sorted({s for s, _ in _rows(df)}) == [f"{orders}.o.eu.1"]
    assert "StringStartsWith" not in _pushed(df)


@pytest.mark.timeout(300)
def test_reads_work_as_before_with_pushdown_off(spark, server, orders):
    spark.conf.set(PUSHDOWN_CONF, "false")
    try:
        df = _load(spark, server, orders).where(f"subject = '{orders}.o.eu.1'")
        assert len(_rows(df)) == 5
        assert "EqualTo" not in _pushed(df)
    finally:
        spark.conf.set(PUSHDOWN_CONF, "true")


def _out_bytes(server) -> int:
    status, body = http_get(server.monitor_url + "/varz")
    assert status == 200
    return json.loads(body)["out_bytes"]


@pytest.mark.timeout(600)
def test_a_filter_matching_one_percent_reads_at_least_ten_times_fewer_bytes_from_the_server(
        pushdown, server, mjs):
    name = f"PDB_{uuid.uuid4().hex[:8].upper()}"
    mjs.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True, storage="memory")
    n = 100_000
    payload = b"x" * 100
    try:
        for i in range(n):
            mjs.publish_async(f"{name}.hot" if i % 100 == 0 else f"{name}.cold.{i % 7}", payload)
            if i % 10_000 == 9_999:
                mjs.publish_async_complete(timeout=60.0)
        mjs.publish_async_complete(timeout=60.0)
        where = f"subject = '{name}.hot'"

        def measured(enabled: str) -> tuple[int, int]:
            pushdown.conf.set(PUSHDOWN_CONF, enabled)
            df = _load(pushdown, server, name).where(where).select("seq")
            before = _out_bytes(server)
            rows = df.count()
            return rows, _out_bytes(server) - before

        rows_off, bytes_off = measured("false")
        rows_on, bytes_on = measured("true")
        assert rows_off == rows_on == n // 100
        assert bytes_off >= 10 * bytes_on, (bytes_off, bytes_on)
    finally:
        pushdown.conf.set(PUSHDOWN_CONF, "true")
        mjs.delete_stream(name)
