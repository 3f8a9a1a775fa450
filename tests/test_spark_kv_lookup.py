# Charter: jss.spark.kv_lookup (docs/spark.md, "Key-value lookups") on the session's local Spark and a
# real bucket: every row gets its key's current value (missing, deleted, purged, null and invalid keys
# null), in batches across partitions, as bytes or text; bad arguments refused on the driver.
from __future__ import annotations

import uuid

import pytest

import jetstream_sync.spark as jss_spark

pytestmark = pytest.mark.spark


@pytest.fixture
def bucket(js):
    name = "L" + uuid.uuid4().hex[:10]
    kv = js.create_key_value(name, storage="memory")
    yield kv
    js.delete_key_value(name)


@pytest.mark.timeout(300)
def test_every_row_gets_its_keys_current_value_and_keys_without_one_get_null(spark, nats_server, bucket):
    for i in range(1500):
        bucket.put(f"c.{i}", f"customer {i}")
    bucket.put("c.1", "renamed")
    bucket.delete("c.2")
    bucket.purge("c.3")
    keys = [f"c.{i % 1600}" for i in range(4000)] + [None, "c.*", "no such", "c.1"]
    df = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], "id long, key string").repartition(3)

    out = jss_spark.kv_lookup(df, "key", bucket=bucket.bucket, servers=nats_server.url)

    assert out.schema.simpleString() == "struct<id:bigint,key:string,value:binary>"
    got = {row.id: row.value for row in out.collect()}
    assert len(got) == len(keys)

    def expected(key):
        if key is None or key in ("c.2", "c.3", "c.*", "no such"):
            return None
        n = int(key[2:])
        if n >= 1500:
            return None
        return b"renamed" if n == 1 else f"customer {n}".encode()

    assert {i: (bytes(v) if v is not None else None) for i, v in got.items()} == \
        {i: expected(k) for i, k in enumerate(keys)}

    text = jss_spark.kv_lookup(df.where("id < 20"), "key", bucket=bucket.bucket, servers=nats_server.url,
                               value="name", decode="utf-8")
    assert text.schema["name"].dataType.simpleString() == "string"
    assert {r.id: r.name for r in text.collect()} == \
        {i: (None if expected(keys[i]) is None else expected(keys[i]).decode()) for i in range(20)}


def test_bad_arguments_are_refused_on_the_driver(spark, nats_server):
    df = spark.createDataFrame([(1, "a")], "id long, key string")
    url = nats_server.url
    with pytest.raises(ValueError, match="no column 'k'"):
        jss_spark.kv_lookup(df, "k", bucket="B", servers=url)
    with pytest.raises(ValueError, match="column 'id' is bigint, not a string"):
        jss_spark.kv_lookup(df, "id", bucket="B", servers=url)
    with pytest.raises(ValueError, match="already has a column 'id'"):
        jss_spark.kv_lookup(df, "key", bucket="B", servers=url, value="id")
    with pytest.raises(ValueError, match="bucket"):
        jss_spark.kv_lookup(df, "key", bucket="no good", servers=url)
    with pytest.raises(ValueError, match="decode"):
        jss_spark.kv_lookup(df, "key", bucket="B", servers=url, decode="json")
    with pytest.raises(TypeError, match="servers"):
        jss_spark.kv_lookup(df, "key", bucket="B")


@pytest.mark.timeout(300)
def test_a_bucket_that_does_not_exist_fails_the_job_naming_it(spark, nats_server):
    df = spark.createDataFrame([(1, "a")], "id long, key string")
    out = jss_spark.kv_lookup(df, "key", bucket="NOPE" + uuid.uuid4().hex[:6], servers=nats_server.url)
    with pytest.raises(Exception, match="NOPE") as err:
        out.collect()
    assert "BucketNotFoundError" in str(err.value) or "not found" in str(err.value)

