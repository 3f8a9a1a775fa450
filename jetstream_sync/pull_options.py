# The options of the pull engines, pure rules with no I/O (ADR-37 "Fetch" and "Consume Configuration
# Options", ADR-42 priority groups): what ``fetch()``/``next()`` and ``messages()``/``consume()``
# accept, their defaults, and the pull request they become. Unit tested without a server
# (tests/test_pull.py, tests/test_priority_groups.py).
#
# Rule: a bad option raises ValueError/TypeError naming it, before anything is sent.
from __future__ import annotations

import threading
from typing import Any, MutableMapping

import attrs

from ._protocol import check_count, check_int, check_seconds, pin_id_of, pull_request
from .config import ConsumerConfig, PriorityPolicy, check_priority_group

__all__ = ["BYTES_BATCH", "ORDERED_HEARTBEAT", "ConsumeOptions", "FetchOptions", "Pin", "PriorityOptions",
           "consume_options", "fetch_options", "priority_options"]

#: With max_bytes the request's batch is set this high, so bytes are the limit (ADR-37).
BYTES_BATCH = 1_000_000
#: Extra time the client waits beyond the server-side ``expires``.
CLIENT_MARGIN = 1.0
#: A fetch with ``timeout=`` asks the server to end its pull this much earlier, so the end arrives in time.
TIMEOUT_MARGIN = 0.1
#: A fetch refused by a 423 pulls again without the pin id only with at least this long left (seconds).
MIN_REST = 0.05
#: The server's ``priority_timeout`` of a ``pinned_client`` consumer that does not set one (seconds).
DEFAULT_PRIORITY_TIMEOUT = 120.0
#: The idle heartbeat of an ordered consumer's ``messages()``/``consume()`` when none is given (seconds;
#: at most ``expires / 2``). Its consumer lives on one server: when that server dies nothing else tells
#: the client, so the missed-heartbeat alarm (2 x this) is how soon it is re-created elsewhere. The cost:
#: while no message comes, the server sends one heartbeat per interval for each pull request waiting
#: (about 0.5 status messages a second for an idle reader).
ORDERED_HEARTBEAT = 2.0


class Pin:
    """The pin id a ``pinned_client`` priority group gave one consumer handle (ADR-42): kept from the
    ``Nats-Pin-Id`` of the messages delivered to it, sent back as ``id`` in its next pulls, forgotten on
    a 423. Every pull of the handle on that group shares it (the handle is the client). Any thread:
    the loop thread reads deliveries, callers of ``next()`` theirs; changes take a lock, reads do not."""

    __slots__ = ("id", "_sent", "_lock")

    def __init__(self) -> None:
        #: The pin id the server gave (None: not pinned, as far as this handle knows).
        self.id: str | None = None
        self._sent = False  # the current id went out in a pull: a 423 may be about it
        self._lock = threading.Lock()

    def for_request(self) -> str | None:
        """The id to send in a pull about to go out (None: none)."""
        pin = self.id
        if pin is not None and not self._sent:
            with self._lock:
                if self.id == pin:
                    self._sent = True
        return pin

    def seen(self, raw_headers: bytes) -> None:
        """A message was delivered with these raw headers: keep the pin id it carries."""
        pin = pin_id_of(raw_headers)
        if pin is not None and pin != self.id:
            with self._lock:
                self.id, self._sent = pin, False

    def refused(self) -> bool:
        """A pull got 423 (pin id mismatch): forget the id, so the next pulls go without one and this
        client stands by. True when it was forgotten; False when the id held now never went out in a
        pull: the 423 may be about an older id (a new pin came meanwhile), so it is kept; if the 423 was
        about it after all (the server pinned a pull sent without an id), the next pull carries it and
        its own 423 forgets it."""
        with self._lock:
            if self.id is None or not self._sent:
                return False
            self.id, self._sent = None, False
            return True


@attrs.frozen(kw_only=True)
class PriorityOptions:
    """The priority-group part of a pull (ADR-42), checked against the consumer's config."""

    group: str
    #: The fields the pull request carries (``group`` and what was given of the rest).
    fields: dict = attrs.field(eq=False)
    #: The handle's pin of ``group`` when the consumer's policy is ``pinned_client``, else None.
    pin: Pin | None = attrs.field(default=None, eq=False)
    #: ``pinned_client``: seconds without a new pull after which the server moves the pin.
    timeout: float | None = None


def _policy_name(policy: Any) -> str:
    return "none" if policy is None else str(policy)


def priority_options(group: Any, min_pending: Any, min_ack_pending: Any, priority: Any,
                     config: ConsumerConfig | None, label: str,
                     pins: MutableMapping[str, Pin] | None = None) -> PriorityOptions | None:
    """Apply ADR-42's rules to a pull's ``group``, ``min_pending``, ``min_ack_pending`` and ``priority``
    against the consumer's ``config`` (what the cached info says; ``label`` names the consumer): None when
    the consumer has no priority groups and none was given. A priority consumer needs ``group=``, one of
    its own; ``min_pending``/``min_ack_pending`` are for ``overflow``, ``priority`` (0 to 9) for
    ``prioritized``. A ``pinned_client`` group takes its :class:`Pin` from ``pins`` (made there when new).
    Raises TypeError/ValueError naming the argument."""
    if group is not None:
        check_priority_group(group, "group")
    fields: dict[str, Any] = {}
    for name, value in (("min_pending", min_pending), ("min_ack_pending", min_ack_pending)):
        if value is not None:
            fields[name] = check_count(value, name)
    if priority is not None:
        if check_int(priority, "priority", 0) > 9:
            raise ValueError(f"priority must be between 0 and 9 (0 is served first), got {priority!r}")
        fields["priority"] = priority
    groups = (config.priority_groups if config is not None else None) or []
    policy = config.priority_policy if config is not None else None
    if not groups:
        for name, value in (("group", group), ("min_pending", min_pending), ("min_ack_pending", min_ack_pending),
                            ("priority", priority)):
            if value is not None:
                raise ValueError(f"{name}={value!r}: {label} has no priority groups")
        return None
    if group is None:
        raise ValueError(f"group= is required: {label} has priority groups {groups} "
                         f"(priority_policy {_policy_name(policy)!r})")
    if group not in groups:
        raise ValueError(f"group={group!r} is not a priority group of {label}: it has {groups}")
    for name in ("min_pending", "min_ack_pending"):
        if name in fields and policy is not PriorityPolicy.OVERFLOW:
            raise ValueError(f"{name} is for priority_policy 'overflow'; {label} has {_policy_name(policy)!r}")
    if priority is not None and policy is not PriorityPolicy.PRIORITIZED:
        raise ValueError(f"priority is for priority_policy 'prioritized'; {label} has {_policy_name(policy)!r}")
    if policy is not PriorityPolicy.PINNED_CLIENT:
        return PriorityOptions(group=group, fields={"group": group, **fields})
    pin = None
    if pins is not None:
        pin = pins.get(group)
        if pin is None:
            pin = pins.setdefault(group, Pin())
    timeout = config.priority_timeout if config is not None and config.priority_timeout else DEFAULT_PRIORITY_TIMEOUT
    return PriorityOptions(group=group, fields={"group": group}, pin=pin, timeout=timeout)


@attrs.frozen(kw_only=True)
class FetchOptions:
    """A validated one-shot pull: what goes into the ``CONSUMER.MSG.NEXT`` request."""

    batch: int
    max_bytes: int | None
    expires: float
    idle_heartbeat: float | None
    no_wait: bool = False
    #: The caller's bound on the whole fetch (seconds), None for none.
    timeout: float | None = None
    #: The priority group the pull belongs to (ADR-42), None for none.
    priority: PriorityOptions | None = None

    def request(self) -> dict[str, Any]:
        """The pull request, with the pin id a pinned group gave this handle as it is now."""
        p = self.priority
        return pull_request(self.batch, max_bytes=self.max_bytes, expires=self.expires,
                            idle_heartbeat=self.idle_heartbeat, no_wait=self.no_wait,
                            priority=None if p is None else p.fields,
                            pin_id=None if p is None or p.pin is None else p.pin.for_request())

    def rest(self, received: int, received_bytes: int, expires: float) -> FetchOptions | None:
        """The options of a pull that asks for what is left of this one (after ``received`` messages of
        ``received_bytes``) for ``expires`` more seconds: a pull the server refused with a 423 is sent
        again without the pin id. None when nothing is left to ask for (or no time, bar a ``no_wait``)."""
        batch = self.batch - received
        max_bytes = None if self.max_bytes is None else self.max_bytes - received_bytes
        if batch <= 0 or (max_bytes is not None and max_bytes <= 0) or (not self.no_wait and expires < MIN_REST):
            return None
        hb = self.idle_heartbeat
        return attrs.evolve(self, batch=batch, max_bytes=max_bytes, expires=self.expires if self.no_wait else expires,
                            idle_heartbeat=None if hb is not None and hb > expires / 2 else hb)

    @property
    def client_deadline(self) -> float:
        """Seconds the client waits: longer than the server-side ``expires``, and never past ``timeout``."""
        wait = self.expires + max(CLIENT_MARGIN, self.expires * 0.1)
        return wait if self.timeout is None else min(wait, self.timeout)


def fetch_options(max_messages: Any = None, max_bytes: Any = None, expires: Any = 30.0,
                  idle_heartbeat: Any = None, no_wait: bool = False, timeout: float | None = None,
                  priority: PriorityOptions | None = None) -> FetchOptions:
    """Apply ADR-37's rules for fetch/next: exactly one of max_messages/max_bytes, positive expiry,
    heartbeat at most half the expiry, on by default from 10 s expiries (5 s, as nats.go).

    A ``timeout`` (seconds, checked by the caller) bounds the fetch: the server-side expiry is cut to
    end :data:`TIMEOUT_MARGIN` before it, and a heartbeat that no longer fits half of it is dropped."""
    max_messages = check_count(max_messages, "max_messages")
    max_bytes = check_count(max_bytes, "max_bytes")
    if max_messages is not None and max_bytes is not None:
        raise ValueError("max_messages and max_bytes are exclusive: give exactly one")
    if max_messages is None and max_bytes is None:
        raise ValueError("give exactly one of max_messages or max_bytes")
    exp = check_seconds(expires, "expires")
    if exp is None:
        raise ValueError("expires must be > 0 seconds, got None")
    hb = check_seconds(idle_heartbeat, "idle_heartbeat")
    if hb is not None and hb > exp / 2:
        raise ValueError(f"idle_heartbeat must be at most half of expires ({exp / 2:.3g}s), got {hb:.3g}s")
    if timeout is not None and not no_wait:
        exp = min(exp, max(timeout - TIMEOUT_MARGIN, timeout / 2))
        if hb is not None and hb > exp / 2:
            hb = None
    if hb is None and exp >= 10 and not no_wait:
        hb = 5.0
    return FetchOptions(batch=max_messages if max_messages is not None else BYTES_BATCH, max_bytes=max_bytes,
                        expires=exp, idle_heartbeat=None if no_wait else hb, no_wait=no_wait,
                        timeout=None if no_wait else timeout, priority=priority)


@attrs.frozen(kw_only=True)
class ConsumeOptions:
    """Validated options of a continuous pull (ADR-37 "Consume Configuration Options")."""

    max_messages: int
    max_bytes: int | None
    expires: float
    idle_heartbeat: float
    threshold_messages: int
    threshold_bytes: int | None
    #: The priority group the pulls belong to (ADR-42), None for none.
    priority: PriorityOptions | None = None

    def request(self, batch: int, max_bytes: int | None) -> dict[str, Any]:
        """One pull request of the continuous pull, with the pin id a pinned group gave this handle."""
        p = self.priority
        return pull_request(batch, max_bytes=max_bytes, expires=self.expires, idle_heartbeat=self.idle_heartbeat,
                            priority=None if p is None else p.fields,
                            pin_id=None if p is None or p.pin is None else p.pin.for_request())


def consume_options(max_messages: Any = None, max_bytes: Any = None, expires: Any = 30.0,
                    idle_heartbeat: Any = None, threshold_messages: Any = None,
                    threshold_bytes: Any = None, priority: PriorityOptions | None = None,
                    ordered: bool = False) -> ConsumeOptions:
    """Apply ADR-37's defaults and rules for messages()/consume().

    ``max_messages`` 500 when neither limit is given; ``max_messages`` and
    ``max_bytes`` exclusive; ``expires`` at least 1 s; ``idle_heartbeat``
    expires/2 capped at 30 s (at least 0.5 s, at most expires/2), or for an
    ``ordered`` consumer :data:`ORDERED_HEARTBEAT` capped at expires/2; thresholds
    50% and never above their limit.

    A ``pinned_client`` group keeps its pin only while new pulls come within its ``priority_timeout``:
    ``expires`` is cut to at most half of it (and the heartbeat to at most half of that).
    """
    mm = check_count(max_messages, "max_messages")
    mb = check_count(max_bytes, "max_bytes")
    if mm is not None and mb is not None:
        raise ValueError("max_messages and max_bytes are exclusive: give at most one")
    exp = check_seconds(expires, "expires")
    if exp is None or exp < 1.0:
        raise ValueError(f"expires must be at least 1 second for messages()/consume(), got {expires!r}")
    hb = check_seconds(idle_heartbeat, "idle_heartbeat")
    if hb is None:
        hb = max(0.5, min(exp / 2, ORDERED_HEARTBEAT if ordered else 30.0))
    elif hb > exp / 2:
        raise ValueError(f"idle_heartbeat must be at most half of expires ({exp / 2:.3g}s), got {hb:.3g}s")
    elif hb < 0.5 or hb > 30.0:
        raise ValueError(f"idle_heartbeat must be between 0.5 and 30 seconds, got {hb:.3g}s")
    if priority is not None and priority.timeout is not None and exp > priority.timeout / 2:
        exp = priority.timeout / 2
        hb = min(hb, exp / 2)
    tm = check_count(threshold_messages, "threshold_messages") if threshold_messages != 0 else 0
    tb = check_count(threshold_bytes, "threshold_bytes") if threshold_bytes != 0 else 0
    if mb is not None:
        if threshold_messages is not None:
            raise ValueError("threshold_messages goes with max_messages; with max_bytes use threshold_bytes")
        tb = mb // 2 if tb is None else tb
        if tb > mb:
            raise ValueError(f"threshold_bytes ({tb}) must not exceed max_bytes ({mb})")
        return ConsumeOptions(max_messages=BYTES_BATCH, max_bytes=mb, expires=exp, idle_heartbeat=hb,
                              threshold_messages=0, threshold_bytes=tb, priority=priority)
    if threshold_bytes is not None:
        raise ValueError("threshold_bytes goes with max_bytes; with max_messages use threshold_messages")
    mm = 500 if mm is None else mm
    tm = mm // 2 if tm is None else tm
    if tm > mm:
        raise ValueError(f"threshold_messages ({tm}) must not exceed max_messages ({mm})")
    return ConsumeOptions(max_messages=mm, max_bytes=None, expires=exp, idle_heartbeat=hb,
                          threshold_messages=tm, threshold_bytes=None, priority=priority)
