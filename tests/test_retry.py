# RetryPolicy retries only retriable errors, a bounded number of times.
import asyncio

import pytest

import jetstream_sync as jss
from jetstream_sync._retry import NO_RETRY


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


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"attempts": True}, {"initial_backoff": -1},
                                    {"max_backoff": "1"}])
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
