# A Spark job run by tests/test_spark_consumer.py in a process of its own, to be killed: a consumer-mode
# streaming query whose driver-side reader, when Spark asks for the batch after its second one (that batch
# is written to the sink and its commit log entry exists) and before it acks that batch's deliveries,
# writes how many deliveries it holds to the marker file and waits to be killed.
# Usage: _spark_consumer_job.py <nats url> <stream> <checkpoint dir> <sink dir> <marker file>
from __future__ import annotations

import os
import sys
import time

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

from jetstream_sync.spark._consumer_reads import ConsumerSettings, ConsumerStreamReader  # noqa: E402
from jetstream_sync.spark.datasource import JetStreamDataSource  # noqa: E402

MARKER = sys.argv[5]


class CrashingReader(ConsumerStreamReader):
    batches = 0

    def _ack(self, offset):
        if self._held and offset == self._held_offset:
            CrashingReader.batches += 1
            if CrashingReader.batches == 2:
                with open(MARKER + ".tmp", "w") as f:
                    f.write(str(len(self._held)))
                os.rename(MARKER + ".tmp", MARKER)
                time.sleep(3600)  # killed here
        return super()._ack(offset)


class CrashingSource(JetStreamDataSource):
    @classmethod
    def name(cls):
        return "jetstream_crashing"

    def streamReader(self, schema):
        return CrashingReader(ConsumerSettings.parse(self.options), schema)


def main(url: str, stream: str, checkpoint: str, out: str) -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("jetstream-sync-consumer-crash")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(CrashingSource)
    query = (spark.readStream.format("jetstream_crashing").option("servers", url).option("stream", stream)
             .option("mode", "consumer").option("durable", "etl").option("maxMessagesPerTrigger", 20_000)
             .option("ackWait", 5).load().select("seq", "data")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint).start())
    query.awaitTermination(300)
    print("the query ended without reaching the crash point:", query.exception(), flush=True)
    sys.exit(1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
