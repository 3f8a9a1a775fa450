# A Spark job run by tests/test_spark_cluster.py against a standalone Spark cluster (spark://...) or a
# Spark Connect server (sc://...), in a process of its own (a Python process holds one SparkContext, and
# the test session's is local). It drives the data source and the publisher through real executors and
# prints the facts the test checks, as one JSON line.
from __future__ import annotations

import json
import os
import sys
import tempfile

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

import jetstream_sync as jss  # noqa: E402
import jetstream_sync.spark  # noqa: E402,F401

N = 2000


def main(master: str, url: str) -> dict:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("jetstream-sync-cluster-test")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.memory", "512m")
             .config("spark.python.worker.reuse", "true").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jss.spark.register(spark)
    facts: dict = {}
    try:
        with jss.connect(url, name="cluster-test-driver") as client:
            js = client.jetstream()
            for name in ("IN", "OUT", "PUB", "COPY"):
                js.create_stream(name=name, subjects=[f"{name}.>"])
            for i in range(N):
                js.publish_async("IN.x", b"%d" % i)
            js.publish_async_complete(timeout=30)

            def source(**options):
                reader = spark.read.format("jetstream").option("servers", url).option("stream", "IN")
                for key, value in options.items():
                    reader = reader.option(key, value)
                return reader.load()

            df = source(minPartitions=4)
            facts["read_partitions"] = df.rdd.getNumPartitions()
            row = df.selectExpr("count(*) AS n", "count(DISTINCT seq) AS seqs").collect()[0]
            facts["read"] = [row.n, row.seqs]

            (df.select("data").write.format("jetstream").option("servers", url).option("subject", "OUT.w")
             .mode("append").save())
            facts["written"] = js.stream_info("OUT").state.messages

            pub = jss.spark.publisher(servers=url, subject="PUB.p", worker_header="Jss-Worker")
            df.select("data").repartition(4).foreachPartition(pub)
            facts["published"] = js.stream_info("PUB").state.messages
            oc = js.ordered_consumer("PUB")
            workers = []
            while len(workers) < N:
                got = [m.headers["Jss-Worker"] for m in oc.fetch(1000, expires=5)]
                if not got:
                    break
                workers.extend(got)
            oc.close(wait=True)  # the job's own reader: only what Spark created is checked below
            pids: dict[str, set] = {}
            for identity in workers:
                pid, conn = identity.split(":")
                pids.setdefault(pid, set()).add(conn)
            facts["connections_per_worker_pid"] = sorted(len(c) for c in pids.values())

            checkpoint = tempfile.mkdtemp(prefix="jss-cluster-ckpt-")
            query = (spark.readStream.format("jetstream").option("servers", url).option("stream", "IN")
                     .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 500).load()
                     .writeStream.format("jetstream").option("servers", url).option("subject", "COPY.c")
                     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            query.awaitTermination(300)
            facts["streamed"] = js.stream_info("COPY").state.messages
            facts["stream_error"] = None if query.exception() is None else str(query.exception())
            facts["consumers_left"] = {name: js.stream_info(name).state.consumer_count
                                       for name in ("IN", "OUT", "PUB", "COPY")}

            # A work queue drained by a consumer-mode query: every job once in DONE, none left in JOBS.
            js.create_stream(name="JOBS", subjects=["JOBS.>"], retention="workqueue", allow_direct=True)
            js.create_stream(name="DONE", subjects=["DONE.>"])
            for i in range(N):
                js.publish_async("JOBS.x", b"%d" % i)
            js.publish_async_complete(timeout=30)
            query = (spark.readStream.format("jetstream").option("servers", url).option("stream", "JOBS")
                     .option("mode", "consumer").option("durable", "cluster").option("maxMessagesPerTrigger", 700)
                     .option("minPartitions", 2).load().select("data")
                     .writeStream.format("jetstream").option("servers", url).option("subject", "DONE.d")
                     .option("checkpointLocation", tempfile.mkdtemp(prefix="jss-cluster-wq-"))
                     .trigger(availableNow=True).start())
            query.awaitTermination(300)
            done = (spark.read.format("jetstream").option("servers", url).option("stream", "DONE").load()
                    .selectExpr("count(*) AS n", "count(DISTINCT data) AS jobs").collect()[0])
            facts["queue"] = [js.stream_info("JOBS").state.messages, done.n, done.jobs]
            facts["queue_error"] = None if query.exception() is None else str(query.exception())
    finally:
        spark.stop()
    return facts


def through_connect(remote: str, url: str) -> dict:
    """A batch read and a batch write through a Spark Connect server: the data source runs on its side."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(remote).getOrCreate()
    facts: dict = {}
    try:
        with jss.connect(url, name="connect-test-driver") as client:
            js = client.jetstream()
            for name in ("IN", "OUT"):
                js.create_stream(name=name, subjects=[f"{name}.>"])
            for i in range(N):
                js.publish_async("IN.x", b"%d" % i)
            js.publish_async_complete(timeout=30)
            df = (spark.read.format("jetstream").option("servers", url).option("stream", "IN")
                  .option("minPartitions", 4).load())
            row = df.selectExpr("count(*) AS n", "count(DISTINCT seq) AS seqs").collect()[0]
            facts["read"] = [row.n, row.seqs]
            (df.select("data").write.format("jetstream").option("servers", url).option("subject", "OUT.w")
             .mode("append").save())
            facts["written"] = js.stream_info("OUT").state.messages
            js.create_stream(name="PUB", subjects=["PUB.>"])
            df.select("data").foreachPartition(jss.spark.publisher(servers=url, subject="PUB.p"))
            facts["published"] = js.stream_info("PUB").state.messages
            facts["consumers_left"] = {name: js.stream_info(name).state.consumer_count for name in ("IN", "OUT")}
    finally:
        spark.stop()
    return facts


if __name__ == "__main__":
    target, nats_url = sys.argv[1], sys.argv[2]
    facts = through_connect(target, nats_url) if target.startswith("sc://") else main(target, nats_url)
    print("FACTS " + json.dumps(facts), flush=True)
