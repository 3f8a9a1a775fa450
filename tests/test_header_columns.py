# Behaviour: a range read's headers and msg_id columns equal decoding every stored header block on its own,
# whether the batch is split by Arrow kernels or (for blocks of another shape) block by block.
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from jetstream_sync import _header_columns
from jetstream_sync._header_columns import header_columns
from jetstream_sync._headers import decode_headers
from jetstream_sync.ranges import arrow_schema

MAP = arrow_schema().field("headers").type


def expected(blocks):
    """What decoding each block with decode_headers gives, as the two columns' Python values."""
    maps, ids = [], []
    for block in blocks:
        h = decode_headers(block) if isinstance(block, bytes) else block
        maps.append(list(h.multi().items()) if h else [])
        ids.append(h.get("Nats-Msg-Id") if h else None)
    return maps, ids


def columns(blocks, raw=True):
    headers, msg_id = header_columns(pa, blocks, MAP, raw=raw)
    assert headers.type == MAP and msg_id.type == pa.string() and len(headers) == len(msg_id) == len(blocks)
    return headers.to_pylist(), msg_id.to_pylist()


COMMON = [
    b"NATS/1.0\r\nNats-Msg-Id: w-0-1\r\n\r\n",
    None,
    b"NATS/1.0\r\nA: 1\r\nB:  x y \r\nNats-Msg-Id:z\r\n",  # no closing empty line (a direct get's stored part)
    b"NATS/1.0\r\n\r\n",
    b"NATS/1.0\r\n",
    b"NATS/1.0\r\nno colon here\r\n: empty key\r\n  Padded  :  v  \r\nK: a:b:c\r\n\r\n",
    "NATS/1.0\r\nUnicode: \u00e9t\u00e9 \u2603\r\n\r\n".encode(),
    b"NATS/1.0\r\nEmpty:\r\nNats-Msg-Id: \r\n\r\n",
]


def test_blocks_of_the_common_shape_are_split_by_kernels_as_decoding_each_gives(monkeypatch):
    by_rows = []
    monkeypatch.setattr(_header_columns, "_by_rows", lambda *a: by_rows.append(a) or pytest.fail("row path"))
    assert columns(COMMON) == expected(COMMON)
    assert columns(COMMON)[1] == ["w-0-1", None, "z", None, None, None, None, ""]
    assert not by_rows


@pytest.mark.parametrize("odd", [
    b"NATS/1.0\r\nk: v1\r\nk: v2\r\nNats-Msg-Id: first\r\nNats-Msg-Id: second\r\n\r\n",  # repeated keys
    b"NATS/1.0 404 No Messages\r\n\r\n",  # a status line
    b"NATS/1.0\r\nA: \xff\xfe\r\n\r\n",  # not UTF-8
    b"NATS/1.0\r\nA: 1\r\n\r\nB: after the end\r\n",  # lines after the empty one
    b"NATS/1.1\r\nA: 1\r\n\r\n",  # another version
])
def test_a_batch_with_a_block_of_another_shape_decodes_as_each_block_alone(odd):
    blocks = [*COMMON, odd, *COMMON]
    assert columns(blocks) == expected(blocks)


def test_decoded_blocks_and_raw_ones_mix():
    blocks = [decode_headers(b"NATS/1.0\r\nNats-Msg-Id: d\r\nk: 1\r\nk: 2\r\n\r\n"), *COMMON]
    assert columns(blocks, raw=False) == expected(blocks)


def test_no_rows_and_rows_without_headers():
    assert columns([]) == ([], [])
    assert columns([None, None]) == ([[], []], [None, None])


@pytest.mark.parametrize("repeats", [False, True])
def test_random_blocks_decode_as_each_alone(repeats, monkeypatch):
    rnd = random.Random(7)
    names = ["Nats-Msg-Id", "A", "b", "Content-Type", " sp ", "", "in side", "\x1c", "\u00a0k\u00a0"]
    values = ["", "v", " padded ", "x:y", "\u00e9", "123", "\t tab", "a\nb", "\u2003wide\u2003", "\u00a0"]
    by_rows = []
    if not repeats:  # every block of the common shape: the kernels take every batch
        rows = _header_columns._by_rows
        monkeypatch.setattr(_header_columns, "_by_rows", lambda *a: by_rows.append(a) or rows(*a))

    def block():
        if rnd.random() < 0.1:
            return None
        keys = [rnd.choice(names) for _ in range(rnd.randint(0, 4))]
        if not repeats:
            keys = list(dict.fromkeys(k.strip() for k in keys))  # each key once, as it will be read
        lines = [f"{k}:{rnd.choice(values)}" for k in keys]
        return ("NATS/1.0\r\n" + "".join(line + "\r\n" for line in lines) + rnd.choice(["", "\r\n"])).encode()

    for _ in range(50):
        blocks = [block() for _ in range(rnd.randint(1, 40))]
        assert columns(blocks) == expected(blocks)
    assert not by_rows


def test_a_batch_larger_than_any_before_counts_on():
    blocks = [f"NATS/1.0\r\nNats-Msg-Id: m{i}\r\n\r\n".encode() for i in range(40_000)]
    headers, ids = columns(blocks)
    assert ids == [f"m{i}" for i in range(40_000)]
    assert headers[-1] == [("Nats-Msg-Id", ["m39999"])]
