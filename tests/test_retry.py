# RetryPolicy retries only retriable errors, a bounded number of times; wait_before_retry is the same
# decision one step at a time, as the loop thread asks it for a publish_async with a msg_id.
import asyncio
import time

import pytest

import jetstream_sync as jss
from jetstream_sync import errors
from jetstream_sync._retry import NO_RETRY, wait_before_retry


def _flaky(failures, exc):
    calls = []

    def fn():
        calls.append(1)
        if len(calls) <= failures:
            raise exc
        return "ok"

    return fn, calls


def test_retriable_errors_are_retried_until_success():
    fn, calls = _flaky(2, jss.TimeoutError("slow"))
    assert jss.RetryPolicy(attempts=3, initial_backoff=0, max_backoff=0).call(fn) == "ok"
    assert len(calls) == 3


def test_attempts_are_bounded_and_the_last_error_is_raised():
    fn, calls = _flaky(5, jss.NoRespondersError("election"))
    with pytest.raises(jss.NoRespondersError):
        jss.RetryPolicy(attempts=2, initial_backoff=0, max_backoff=0).call(fn)
    assert len(calls) == 2


def test_non_retriable_errors_are_raised_at_once():
    fn, calls = _flaky(1, jss.StreamNotFoundError(404, 10059, "nope"))
    with pytest.raises(jss.StreamNotFoundError):
        jss.RetryPolicy(attempts=5, initial_backoff=0).call(fn)
    assert len(calls) == 1


def test_no_retry_calls_once():
    fn, calls = _flaky(1, jss.TimeoutError("slow"))
    with pytest.raises(jss.TimeoutError):
        NO_RETRY.call(fn)
    assert len(calls) == 1


def _flaky_async(failures, exc):
    fn, calls = _flaky(failures, exc)

    async def afn():
        return fn()

    return afn, calls


def test_on_the_loop_retriable_errors_are_retried_the_same_way():
    afn, calls = _flaky_async(2, jss.TimeoutError("slow"))
    policy = jss.RetryPolicy(attempts=3, initial_backoff=0, max_backoff=0)
    assert asyncio.run(policy.call_async(afn)) == "ok"
    assert len(calls) == 3
    afn, calls = _flaky_async(5, jss.NoRespondersError("election"))
    with pytest.raises(jss.NoRespondersError):
        asyncio.run(jss.RetryPolicy(attempts=2, initial_backoff=0, max_backoff=0).call_async(afn))
    assert len(calls) == 2


def test_on_the_loop_non_retriable_errors_and_no_retry_call_once():
    afn, calls = _flaky_async(1, jss.StreamNotFoundError(404, 10059, "nope"))
    with pytest.raises(jss.StreamNotFoundError):
        asyncio.run(jss.RetryPolicy(attempts=5, initial_backoff=0).call_async(afn))
    assert len(calls) == 1
    afn, calls = _flaky_async(1, jss.TimeoutError("slow"))
    with pytest.raises(jss.TimeoutError):
        asyncio.run(NO_RETRY.call_async(afn))
    assert len(calls) == 1


IN_PROCESS = errors.api_error_from({"code": 409, "err_code": 10158, "description": "duplicate message id in process"})


@pytest.mark.parametrize("exc", [jss.TimeoutError("slow"), jss.NoRespondersError("election"),
                                 jss.APIError(503, 10008, "unavailable"), IN_PROCESS, jss.NotConnectedError("full")])
def test_a_retriable_error_is_tried_again_after_the_policys_backoff(exc):
    # The step a retry on the loop thread (publish_async with a msg_id) asks for: tenacity's schedule,
    # initial_backoff * 2**(attempt - 1) capped at max_backoff, plus up to initial_backoff of jitter.
    policy = jss.RetryPolicy(attempts=5, initial_backoff=0.1, max_backoff=0.3)
    assert [wait_before_retry(policy, exc, n, jitter=0) for n in (1, 2, 3, 4)] == pytest.approx([0.1, 0.2, 0.3, 0.3])
    assert wait_before_retry(policy, exc, 1, jitter=1) == pytest.approx(0.2)
    assert 0.1 <= wait_before_retry(policy, exc, 1) <= 0.2
    assert wait_before_retry(policy, exc, 5) is None  # the fifth attempt was the last
    assert wait_before_retry(NO_RETRY, exc, 1) is None
    assert wait_before_retry(jss.RetryPolicy(attempts=10**6, max_backoff=1.0), exc, 10**5, jitter=0) == 1.0


@pytest.mark.parametrize("exc", [jss.StreamNotFoundError(404, 10059, "nope"),
                                 jss.StreamWrongLastSequenceError(400, 10071, "wrong last sequence"),
                                 jss.APIError(503, 10077, "maximum messages exceeded"),
                                 jss.APIError(409, None, "Leadership Change"),
                                 jss.ClientClosedError("closed"), jss.PermissionViolationError("no"),
                                 ValueError("bad")])
def test_an_error_that_is_not_retriable_is_never_tried_again(exc):
    assert wait_before_retry(jss.RetryPolicy(attempts=5), exc, 1) is None


def test_duplicate_message_id_in_process_is_retried_until_the_earlier_publish_is_decided():
    fn, calls = _flaky(2, IN_PROCESS)
    assert jss.RetryPolicy(attempts=3, initial_backoff=0, max_backoff=0).call(fn) == "ok"
    assert len(calls) == 3
    fn, calls = _flaky(5, IN_PROCESS)
    with pytest.raises(jss.MsgIdInProcessError) as info:  # attempts spent: raised as it came
        jss.RetryPolicy(attempts=2, initial_backoff=0, max_backoff=0).call(fn)
    assert info.value.err_code == 10158 and len(calls) == 2


@pytest.mark.timeout(10)
def test_a_deadline_ends_the_retries_before_the_attempts_run_out():
    fn, calls = _flaky(10**6, jss.NoRespondersError("election"))
    policy = jss.RetryPolicy(attempts=10**6, initial_backoff=0.01, max_backoff=0.02, deadline=0.3)
    started = time.monotonic()
    with pytest.raises(jss.NoRespondersError):
        policy.call(fn)
    assert 0.3 <= time.monotonic() - started < 3.0
    assert 5 < len(calls) < 10**6  # many quick tries, then the deadline
    with pytest.raises(jss.NoRespondersError):
        asyncio.run(policy.call_async(_flaky_async(10**6, jss.NoRespondersError("election"))[0]))
    # One step at a time (the loop thread's publish_async retries): no step once the deadline passed.
    assert wait_before_retry(policy, jss.NoRespondersError("election"), 1, jitter=0, elapsed=0.29) is not None
    assert wait_before_retry(policy, jss.NoRespondersError("election"), 1, jitter=0, elapsed=0.3) is None
    assert wait_before_retry(jss.RetryPolicy(attempts=5), jss.TimeoutError("slow"), 1, elapsed=10**6) is not None


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"attempts": True}, {"initial_backoff": -1},
                                    {"max_backoff": "1"}, {"deadline": 0}, {"deadline": -1.0}, {"deadline": "5"}])
def test_bad_policies_are_refused(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        jss.RetryPolicy(**kwargs)


def test_a_policy_assigned_to_a_context_governs_its_api_requests(client):
    # The context's request path reads the policy at each request, so assigning one after the
    # context was made takes effect for lookups as it does for publish(msg_id=...).
    js = client.jetstream()
    calls = []

    class Counting(jss.RetryPolicy):
        def call(self, fn):
            calls.append(1)
            return super().call(fn)

    js.retry = Counting(attempts=2)
    with pytest.raises(jss.StreamNotFoundError):
        js.stream_info("NO_SUCH_STREAM_FOR_RETRY")
    assert calls == [1]
    with pytest.raises(TypeError, match="retry must be a RetryPolicy"):
        js.retry = 3
