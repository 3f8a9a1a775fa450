# Charter: the Spark parts when a node dies in the shared 3-node cluster (nats_cluster): a publisher()
# task whose stream's leader is killed halfway waits out the election and stores every row exactly once,
# instead of failing (in local mode Spark retries no task, and a failed task ends a streaming query).
# Code under test: spark/_connections.py (the contexts' election retry), spark/_publisher.py.
from __future__ import annotations

import uuid

import pytest

import jetstream_sync as jss
import jetstream_sync.spark  # noqa: F401 - jss.spark

from conftest import wait_for

pytestmark = pytest.mark.cluster

ROWS = 6000
KILL_AT = 2000  # rows handed to the task before the stream's leader is killed


@pytest.mark.timeout(120)
def test_a_publisher_task_whose_streams_leader_dies_waits_out_the_election_and_stores_every_row_once(
        nats_cluster):
    nats_cluster.wait_ready()
    name = f"SPK_{uuid.uuid4().hex[:8].upper()}"
    admin = jss.connect(nats_cluster.urls, timeout=2.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    js = admin.jetstream(retry=jss.RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.5))
    victim = pub = None
    try:
        js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="file", num_replicas=3)
        wait_for(lambda: js.stream_info(name).cluster.leader, timeout=30, what="the stream's leader")
        leader = js.stream_info(name).cluster.leader
        victim = next(i for i, n in enumerate(nats_cluster.nodes) if n.name == leader)
        # The task's connection is to a node that lives: what it waits out is the election, not a reconnect.
        survivors = [n.url for i, n in enumerate(nats_cluster.nodes) if i != victim]
        pub = jss.spark.publisher(survivors, subject=f"{name.lower()}.x", write_id="nodedeath", timeout=2.0,
                                  max_pending=100)

        def rows():
            for i in range(ROWS):
                if i == KILL_AT:
                    nats_cluster.kill_node(victim)  # the stream has no leader until the others elect one
                yield {"data": b"%d" % i}

        assert pub.publish(rows(), partition_id=0) == ROWS  # no PublishError: the election was waited out
        state = js.stream_info(name).state
        assert (state.messages, state.last_seq) == (ROWS, ROWS)  # every row once, retried ones deduplicated
        new_leader = js.stream_info(name).cluster.leader
        assert new_leader and new_leader != leader
    finally:
        try:
            if victim is not None and not nats_cluster.nodes[victim].is_running:
                nats_cluster.start_node(victim)
            nats_cluster.wait_ready()
            try:
                js.delete_stream(name)
            except jss.JetStreamError:
                pass  # the cluster is shared; a leftover stream harms nobody
        finally:
            admin.close()
            if pub is not None:
                jss.spark.drop(pub.options)
