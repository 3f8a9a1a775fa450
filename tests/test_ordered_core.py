# ordered_core: the state and reset workflow both ordered engines compose (ordered pull and ordered
# push). Pure: the engine it moves and the request path are stand-ins recording what they were asked;
# no server. What the engines do with it against a real server is in test_ordered.py and the ordered
# tests of test_subscribe.py, test_faults.py and test_push_faults.py.
from __future__ import annotations

import asyncio
import threading

import pytest

import jetstream_sync as jss
from jetstream_sync._engine import Target, Warning_
from jetstream_sync.api import ApiPrefix
from jetstream_sync.ordered_core import OrderedCore


class _Api:
    """The request path: records creates and deletes; ``gate`` holds a create until set."""

    def __init__(self) -> None:
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.gate: asyncio.Event | None = None

    async def request_async(self, subject, payload, timeout=None, *, idempotent):
        if self.gate is not None:
            await self.gate.wait()
        self.created.append(payload["config"])
        return {}

    def request_soon(self, subject, payload, what):
        self.deleted.append(subject.rsplit(".", 1)[-1])


class _Engine:
    """The pull or push engine the core moves: only what the core asks of it."""

    def __init__(self) -> None:
        self.halted = threading.Event()
        self.ending = False
        self.suspended = 0
        self.halted_with: list = []

    async def suspend(self) -> None:
        self.suspended += 1

    def halt(self, err) -> None:
        self.halted_with.append(err)
        self.ending = True
        self.halted.set()


def _core(api: _Api, items: list, tasks: list) -> OrderedCore:
    target = Target(conn=None, label="the ordered consumer of stream 'S'", timeout=5.0, name="o", stream="S",
                    consumer="o", jsapi=api, api=ApiPrefix(None, None))
    return OrderedCore(target, items.append,
                       spawn=lambda coro, name=None: tasks.append(asyncio.get_running_loop().create_task(coro)))


def _ack(stream_seq: int, consumer_seq: int) -> bytes:
    return f"$JS.ACK.S.o.1.{stream_seq}.{consumer_seq}.0.0".encode()


def _configs():
    """The next incarnation's config, as the engines make it: a new name, after the cursor."""
    names = iter(f"o_{i}" for i in range(1, 100))

    def config(after: int) -> jss.ConsumerConfig:
        if after:
            return jss.ConsumerConfig(name=next(names), ack_policy="none", deliver_policy="by_start_sequence",
                                      opt_start_seq=after + 1)
        return jss.ConsumerConfig(name=next(names), ack_policy="none")

    return config


async def _settle(tasks: list) -> None:
    for _ in range(50):
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)


@pytest.mark.parametrize("kind", ["pull", "push"])
@pytest.mark.parametrize("asked_by", ["gap", "reconnect", "heartbeat"])
@pytest.mark.timeout(10)
def test_a_reset_requested_during_a_reset_is_never_lost(kind, asked_by):
    # Both kinds' reset steps: pull creates then pulls; push subscribes, then creates (the new consumer
    # may deliver before its create returned). Whatever asks for a reset while one runs, one follows.
    api, items, tasks = _Api(), [], []
    core = _core(api, items, tasks)
    _config = _configs()
    engine = _Engine()
    moves: list[str] = []

    async def move() -> None:
        moves.append("move")
        if len(moves) == 1:
            if asked_by == "gap":  # the new consumer's first delivery is out of step
                assert not core.admit(_ack(12, 2))
            else:
                core.lost(asked_by, jss.NoHeartbeatError("no heartbeat"))
        if kind == "push":
            await asyncio.sleep(0)  # the subscription
        await core.create(_config)

    core.bind(engine, move)

    async def run() -> None:
        core.cursor = 10
        await core.reset()
        await _settle(tasks)

    asyncio.run(run())
    assert moves == ["move", "move"] and core.resets == 2 and engine.suspended == 2
    assert [c["name"] for c in api.created] == ["o_1", "o_2"]
    assert [c.get("opt_start_seq") for c in api.created] == [11, 11]  # both after the last kept message
    assert api.deleted == ["o_1"] and core.name == "o_2"  # the one replaced is deleted, not leaked
    assert not core.resetting


@pytest.mark.timeout(10)
def test_many_requests_during_a_reset_make_one_more_reset_not_many():
    api, items, tasks = _Api(), [], []
    core = _core(api, items, tasks)
    _config = _configs()
    moves: list[int] = []

    async def move() -> None:
        moves.append(1)
        if len(moves) == 1:
            for _ in range(5):
                core.reset_soon()
        await core.create(_config)

    core.bind(_Engine(), move)
    asyncio.run(core.reset())
    assert len(moves) == 2 and tasks == []  # asked while running: none spawned beside it


@pytest.mark.timeout(10)
def test_a_request_while_idle_starts_a_reset_and_one_after_the_end_starts_none():
    api, items, tasks = _Api(), [], []
    core = _core(api, items, tasks)
    _config = _configs()
    engine = _Engine()
    moves: list[int] = []

    async def move() -> None:
        moves.append(1)
        await core.create(_config)

    core.bind(engine, move)

    async def run() -> None:
        core.reset_soon()
        await _settle(tasks)
        engine.halt(None)
        core.reset_soon()
        await _settle(tasks)

    asyncio.run(run())
    assert len(moves) == 1 and len(tasks) == 1


@pytest.mark.timeout(10)
def test_a_consumer_created_after_the_read_ended_is_deleted_at_once():
    api, items, tasks = _Api(), [], []
    core = _core(api, items, tasks)
    _config = _configs()
    engine = _Engine()

    async def move() -> None:
        assert await core.create(_config) is None

    core.bind(engine, move)

    async def run() -> None:
        api.gate = asyncio.Event()
        task = asyncio.get_running_loop().create_task(core.reset())
        await asyncio.sleep(0)
        engine.ending = True  # told to stop while the create is on its way
        api.gate.set()
        await task

    asyncio.run(run())
    assert [c["name"] for c in api.created] == ["o_1"] and api.deleted == ["o_1"] and core.name == ""
    core.ended()
    assert api.deleted == ["o_1"]  # nothing current: the end deletes nothing more


def test_deliveries_in_step_move_the_cursor_and_one_out_of_step_is_dropped_and_asks_for_a_reset():
    api, items, tasks = _Api(), [], []
    core = _core(api, items, tasks)
    _config = _configs()
    engine = _Engine()
    core.bind(engine, lambda: None)  # never run: the reset is only asked for
    core.resetting = True  # a reset running: the request is remembered, nothing spawned
    assert core.admit(_ack(5, 1)) and core.admit(_ack(9, 2))
    assert (core.cursor, core.consumer_seq) == (9, 2)
    assert not core.admit(_ack(11, 4))  # consumer sequence 3 is missing
    assert (core.cursor, core.consumer_seq) == (9, 2) and core._again and tasks == []
    assert core.admit(b"")  # a core message without an ack subject is never out of step


def test_a_missed_heartbeat_and_an_overflow_are_said_once_each_as_warnings():
    api, items, tasks = _Api(), [], []
    core = _core(api, items, tasks)
    _config = _configs()
    core.bind(_Engine(), lambda: None)
    core.resetting = True
    assert core.lost("heartbeat", jss.NoHeartbeatError("the ordered consumer of stream 'S': no heartbeat"))
    assert core.lost("dropped", None)  # during a reset: the reset already restarts after the last kept
    core.resetting = False
    core._spawn = lambda coro, name=None: coro.close()
    assert core.lost("dropped", None)
    said = [type(i.error) for i in items if type(i) is Warning_]
    assert said == [jss.NoHeartbeatError, jss.SlowConsumerError]


class _DeadNodeApi(_Api):
    """The first create lands on a server that died: it is never answered. Later ones are."""

    async def request_async(self, subject, payload, timeout=None, *, idempotent):
        if not self.created:
            self.created.append(payload["config"])
            await asyncio.Event().wait()  # never answered
        self.created.append(payload["config"])
        return {}


@pytest.mark.timeout(10)
def test_a_hedged_create_not_answered_is_joined_by_another_and_the_unanswered_one_is_deleted():
    api, items, tasks = _DeadNodeApi(), [], []
    target = Target(conn=None, label="the ordered consumer of stream 'S'", timeout=5.0, name="o", stream="S",
                    consumer="o", jsapi=api, api=ApiPrefix(None, None))
    core = OrderedCore(target, items.append, hedge=0.05,
                       spawn=lambda coro, name=None: tasks.append(asyncio.get_running_loop().create_task(coro)))
    _config = _configs()
    engine = _Engine()
    names: list = []

    async def move() -> None:
        names.append(await core.create(_config))

    core.bind(engine, move)

    async def run() -> None:
        await asyncio.wait_for(core.reset(), 5)

    asyncio.run(run())
    assert names == ["o_2"] and core.name == "o_2"
    assert api.deleted == ["o_1"]  # the try that was never answered may still land: deleted
    assert items == []  # a hedge is no failure: nothing to warn about


@pytest.mark.timeout(10)
def test_a_create_given_up_while_on_its_way_is_deleted_again_once_the_server_answers_it():
    # The caller's delete may reach the server before the create it gave up on (in a cluster the two
    # take different paths): the create is left to end, and what it made is deleted after its answer.
    api, items = _Api(), []
    api.gate = asyncio.Event()
    target = Target(conn=None, label="the ordered consumer of stream 'S'", timeout=5.0, name="o", stream="S",
                    consumer="o", jsapi=api, api=ApiPrefix(None, None))
    core = OrderedCore(target, items.append, hedge=1.0,
                       spawn=lambda coro, name=None: asyncio.get_running_loop().create_task(coro))
    _config = _configs()
    core.bind(_Engine(), lambda: core.create(_config))

    async def run() -> None:
        reset = asyncio.ensure_future(core.reset())
        await asyncio.sleep(0.05)  # the create is on its way, its answer held back
        reset.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reset
        assert api.deleted == ["o_1"]  # at once, as before: it may never be answered
        api.gate.set()  # ... but here the server made it after all
        for _ in range(100):
            if len(api.deleted) == 2:
                break
            await asyncio.sleep(0.01)

    asyncio.run(run())
    assert api.created and api.deleted == ["o_1", "o_1"]
