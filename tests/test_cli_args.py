# The command line's value parsers on their own (pure functions): durations as the nats CLI spells
# them, unlimited ages, sampling percentages, consumer start positions and empty filters.
from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone

import pytest

from jetstream_sync.cli._args import age, deliver_start, duration, filters, percent

DAY = 86400.0


@pytest.mark.parametrize("text, seconds", [
    ("30s", 30.0), ("2m", 120.0), ("1h30m", 5400.0), ("250ms", 0.25), ("2d", 2 * DAY), ("1w", 7 * DAY),
    ("1y", 365 * DAY), ("2y", 730 * DAY), ("6M", 180 * DAY), ("1M2m", 30 * DAY + 120), ("1H", 3600.0), ("1.5", 1.5),
])
def test_durations_take_the_nats_cli_units_with_capital_m_for_months(text, seconds):
    assert duration(text) == pytest.approx(seconds)


def test_a_year_is_the_walkthroughs_8760_hours():
    assert duration("1y") == 8760 * 3600


@pytest.mark.parametrize("text", ["", "1x", "y", "-5s", "1 y"])
def test_a_bad_duration_names_the_units(text):
    with pytest.raises(argparse.ArgumentTypeError, match="M for months"):
        duration(text)


def test_an_age_of_minus_one_is_no_limit():
    assert (age("-1"), age("unlimited"), age("1y")) == (0.0, 0.0, 365 * DAY)


@pytest.mark.parametrize("text, freq", [("100", "100%"), ("100%", "100%"), ("0", "0%"), (" 80 % ", "80%")])
def test_sampling_takes_a_percentage_with_or_without_its_sign(text, freq):
    assert percent(text) == freq


@pytest.mark.parametrize("text", ["101", "-1", "all", ""])
def test_a_bad_sampling_rate_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="0 to 100"):
        percent(text)


def test_the_start_of_a_consumer_is_a_policy_a_sequence_a_duration_ago_or_a_time():
    assert deliver_start("all") == {"deliver_policy": "all"}
    assert deliver_start("last-per-subject") == {"deliver_policy": "last_per_subject"}
    assert deliver_start("10") == {"deliver_policy": "by_start_sequence", "opt_start_seq": 10}
    ago = deliver_start("2m")
    assert ago["deliver_policy"] == "by_start_time"
    assert abs(datetime.now(timezone.utc) - timedelta(minutes=2) - ago["opt_start_time"]) < timedelta(seconds=5)
    at = deliver_start("2024-05-01T12:00:00Z")["opt_start_time"]
    assert at == datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    with pytest.raises(argparse.ArgumentTypeError, match="a stream sequence"):
        deliver_start("0")


def test_an_empty_filter_means_every_subject():
    assert filters("") == [] and filters("a.b,c.>") == ["a.b", "c.>"]
