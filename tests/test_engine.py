# _engine: the contract between readers and engines, and the one idle-heartbeat alarm every engine
# keeps (ADR-37: silence for twice the idle heartbeat is a missed heartbeat, reported once); the pull
# engine's credit and the push engine's flow-control ledger, the pure bookkeeping each engine holds.
# Pure: the clock is read, never waited on. The engines' use of it runs against a real server in
# the heartbeat tests of test_consume.py, test_ordered.py and test_faults.py.
from __future__ import annotations

import math
import time

from jetstream_sync._engine import HeartbeatWatch, Terminal, Warning_
from jetstream_sync.pull import PullCredit
from jetstream_sync.pull_options import BYTES_BATCH, consume_options
from jetstream_sync.push import FlowLedger


def test_silence_for_twice_the_interval_is_one_missed_heartbeat():
    watch = HeartbeatWatch(5.0)
    start = watch.last_seen
    assert watch.limit == 10.0
    assert not watch.missed(start + 9.99)
    assert watch.missed(start + 10.0)
    # Reported once: the count restarts at the moment it was missed.
    assert not watch.missed(start + 10.5)
    assert watch.missed(start + 20.0)


def test_anything_seen_restarts_the_count():
    watch = HeartbeatWatch(1.0)
    watch.last_seen -= 1.5
    watch.seen()
    now = time.monotonic()
    assert not watch.missed(now)
    assert 1.9 <= watch.due_in(now) <= 2.0


def test_without_heartbeats_nothing_is_ever_missed():
    watch = HeartbeatWatch(None)
    assert watch.limit == math.inf and watch.due_in(time.monotonic()) == math.inf
    assert not watch.missed(time.monotonic() + 1e9)


def test_sunk_items_carry_their_error():
    err = RuntimeError("x")
    assert Warning_(err).error is err
    assert Terminal(None).error is None


# --- the pull credit (ADR-37): requested and not yet taken, topped up at the threshold ---------------


def test_the_first_pull_asks_for_the_whole_limit_and_the_next_only_once_credit_fell_to_the_threshold():
    credit = PullCredit(consume_options(max_messages=10))  # threshold 5
    assert credit.next_request() == (10, None)
    assert credit.next_request() is None  # all 10 still pending
    for _ in range(10):
        assert not credit.delivered(100)  # delivered and buffered is still credit: 10 > 5
    assert (credit.pending_msgs, credit.buffered_msgs, credit.buffered_bytes) == (0, 10, 1000)
    assert credit.next_request() is None  # nothing to ask while the buffer holds 10
    assert [credit.taken(100) for _ in range(5)] == [False, False, False, False, True]  # credit 5: due
    assert credit.next_request() == (5, None)  # back up to the limit of 10
    assert credit.pending_msgs == 5 and not credit.scheduled


def test_a_refill_is_asked_for_once_until_it_ran():
    credit = PullCredit(consume_options(max_messages=4))
    credit.next_request()
    for _ in range(4):
        credit.delivered(1)
    asked = [credit.taken(1) for _ in range(4)]
    assert asked == [False, True, False, False]  # credit 2 (the threshold) asks; later takes wait for it
    assert credit.next_request() == (4, None) and not credit.scheduled


def test_credit_that_never_arrives_is_forgotten_or_cancelled_and_an_unsent_request_is_not_pending():
    credit = PullCredit(consume_options(max_messages=10))
    credit.next_request()
    credit.cancelled(3, 0)  # a 408/409 naming what it did not deliver
    assert credit.pending_msgs == 7
    credit.cancelled(30, 0)
    assert credit.pending_msgs == 0  # never below zero
    batch, max_bytes = credit.next_request()
    credit.unsent(batch, max_bytes)
    assert credit.pending_msgs == 0
    credit.next_request()
    credit.forget()
    assert credit.pending_msgs == 0 and credit.next_request() == (10, None)


def test_byte_credit_asks_for_the_free_bytes_and_a_message_too_big_waits_for_an_empty_buffer():
    credit = PullCredit(consume_options(max_bytes=1000))  # threshold 500 bytes
    assert credit.next_request() == (BYTES_BATCH, 1000)
    credit.delivered(600)
    credit.cancelled(0, 400)  # the pull ended: "message size exceeds maxbytes"
    assert not credit.too_big()  # 600 bytes still buffered: wait for the reader to take them
    credit.taken(100)
    assert credit.next_request() is None  # not empty yet
    credit.taken(500)
    assert credit.next_request() == (BYTES_BATCH, 1000)  # empty: the whole budget
    credit.forget()
    assert credit.too_big()  # empty already: even the whole budget is too small


def test_a_pull_ending_with_too_little_room_left_while_a_refill_is_out_is_not_a_message_too_big():
    # Messages of 300 B, a budget of 1000: the first pull fits three and ends with 100 B to spare;
    # by then the reader took all three and the refill (600 B) is out. The buffer is empty, yet the
    # next message fits the refill: no "too big" warning, no back-off.
    credit = PullCredit(consume_options(max_bytes=1000))  # threshold 500 bytes
    assert credit.next_request() == (BYTES_BATCH, 1000)
    for _ in range(3):
        credit.delivered(300)
    assert [credit.taken(300) for _ in range(2)] == [False, True]  # credit 100 + 300: due
    assert credit.next_request() == (BYTES_BATCH, 600)
    credit.taken(300)
    credit.cancelled(0, 100)  # the first pull ended: "message size exceeds maxbytes", 100 B unused
    assert credit.buffered_bytes == 0 and not credit.too_big(100)
    assert credit.next_request() is None  # the refill's 600 B are still on their way
    credit.forget()
    assert credit.next_request() == (BYTES_BATCH, 1000)
    credit.cancelled(0, 1000)
    assert credit.too_big(1000)  # the whole budget had no room for it: it can never be delivered


def test_a_pull_ending_with_too_little_room_asks_again_once_a_request_can_hold_the_message():
    # Messages of 300 B, a budget of 1000: a pull fits three and ends with 100 B to spare. The next
    # request need not wait for the reader to empty the buffer (a slow reader would then stall the
    # server for a whole buffer); it goes as soon as it can offer room for one more message.
    credit = PullCredit(consume_options(max_bytes=1000))  # threshold 500 bytes
    assert credit.next_request() == (BYTES_BATCH, 1000)
    for _ in range(3):
        credit.delivered(300)
    credit.cancelled(0, 100)  # "message size exceeds maxbytes", 100 B unused
    assert not credit.too_big(100)
    assert credit.taken(300) is False  # credit 600: above the threshold
    assert credit.next_request() is None
    assert credit.taken(300) is True  # credit 300: due, and 700 B of room hold the next message
    assert credit.next_request() == (BYTES_BATCH, 700)


def test_a_request_too_small_for_the_message_that_did_not_fit_waits():
    # A budget of 1000 with threshold 900: a refill of 150 B could not hold the 300 B messages seen.
    credit = PullCredit(consume_options(max_bytes=1000, threshold_bytes=900))
    assert credit.next_request() == (BYTES_BATCH, 1000)
    for _ in range(3):
        credit.delivered(300)
    credit.cancelled(0, 100)
    assert not credit.too_big(100)
    credit.taken(50)  # credit 850: due, but only 150 B of room
    assert credit.next_request() is None
    credit.taken(250)  # credit 600: 400 B of room hold a message
    assert credit.next_request() == (BYTES_BATCH, 400)
    assert credit.room_needed == 0  # the wait is over


# --- the push flow-control ledger (ADR-15): answered once everything before it was taken -------------


def test_a_flow_control_request_is_answered_once_readers_took_every_message_before_it():
    ledger = FlowLedger(100, 10_000)
    for _ in range(3):
        ledger.delivered(10)
    assert not ledger.requested(3, "fc.1")  # three delivered, none taken: it waits
    assert ledger.due() == []
    assert not ledger.taken(10) and not ledger.taken(10)
    assert ledger.taken(10)  # the third: the request is due
    assert ledger.due() == ["fc.1"] and ledger.due() == []
    assert ledger.requested(3, "fc.2")  # nothing untaken before it: at once
    assert (ledger.buffered_msgs, ledger.buffered_bytes, ledger.taken_count) == (0, 0, 3)


def test_requests_come_due_in_order_and_a_new_consumer_forgets_the_old_ones():
    ledger = FlowLedger(100, 10_000)
    for _ in range(4):
        ledger.delivered(1)
    ledger.requested(2, "fc.a")
    ledger.requested(4, "fc.b")
    ledger.taken(1)
    ledger.taken(1)
    assert ledger.due() == ["fc.a"]
    ledger.forget_requests()
    ledger.taken(1)
    assert not ledger.taken(1) and ledger.due() == []


def test_a_subject_is_answered_once_and_the_buffer_is_full_at_either_limit():
    ledger = FlowLedger(2, 100)
    assert ledger.first_answer("fc.1") and not ledger.first_answer("fc.1") and ledger.first_answer("fc.2")
    assert not ledger.full(100)
    ledger.delivered(60)
    assert ledger.full(41) and not ledger.full(40)  # bytes
    ledger.delivered(10)
    assert ledger.full(1)  # messages
    ledger.taken(10)
    assert not ledger.full(30)
