# Stored NATS header blocks as Arrow columns: the ``headers`` map column and the ``msg_id`` column of a
# range read (jetstream_sync.ranges), built from the raw blocks of a whole record batch at once.
# Rule 1: pure. No I/O, no threads; pyarrow is passed in (the caller imports the optional extra).
# Rule 2: the result equals decoding every block with ``_headers.decode_headers`` (keys and values
#         stripped, every value of a repeated key kept in order, the first one as ``msg_id``). Blocks of
#         the common shape ("NATS/1.0", then "Key: value" lines, each key once) are split by Arrow
#         kernels, a few calls per batch (a Python list per row only for rows with several headers, to
#         look for a repeated key); a batch holding anything else
#         (a status line, a repeated key, bytes that are not UTF-8) is decoded block by block.
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._headers import Headers, decode_headers

__all__ = ["MSG_ID", "header_columns"]

#: The header a message id is stored under.
MSG_ID = "Nats-Msg-Id"
_VERSION_LINE = "NATS/1.0\r\n"
_NO_HEADERS = b"NATS/1.0\r\n"


def header_columns(pa: Any, blocks: Sequence[bytes | Headers | None], map_type: Any, *, raw: bool) -> tuple[Any, Any]:
    """``(headers, msg_id)`` of the messages whose stored headers are ``blocks``: raw header blocks as
    received or None (``raw``), else any mix of those and blocks decoded already. A ``map_type``
    (``map<string, list<string>>``) array with an empty map for a message without headers, and a
    string array of each message's ``Nats-Msg-Id`` (null where it has none)."""
    if raw:
        columns = _by_kernels(pa, blocks, map_type)
        if columns is not None:
            return columns
    return _by_rows(pa, blocks, map_type)


def _by_rows(pa: Any, blocks: Sequence[bytes | Headers | None], map_type: Any) -> tuple[Any, Any]:
    """The columns by decoding each block on its own (any block)."""
    offsets = [0]
    keys: list[str] = []
    values: list[list[str]] = []
    ids: list[str | None] = []
    for block in blocks:
        h = block if isinstance(block, Headers) or block is None else decode_headers(block)
        if h:
            multi = h.multi()
            keys += multi
            values += multi.values()
            ids.append(h.get(MSG_ID))
        else:
            ids.append(None)
        offsets.append(len(keys))
    headers = pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, map_type.key_type),
                                      pa.array(values, map_type.item_type))
    return headers, pa.array(ids, pa.string())


def _by_kernels(pa: Any, blocks: Sequence[bytes | None], map_type: Any) -> tuple[Any, Any] | None:
    """The columns by Arrow kernels over the whole batch, or None when a block is not of the common
    shape (then every block is decoded on its own)."""
    import pyarrow.compute as pc

    try:
        text = pc.fill_null(pa.array(blocks, pa.binary()), _NO_HEADERS).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: decoded with replacement characters, row by row
        return None
    if not pc.all(pc.starts_with(text, _VERSION_LINE)).as_py():
        return None  # a status line ("NATS/1.0 404 ...") or no version line at all
    ends = pc.find_substring(text, "\r\n\r\n")
    if not pc.all(pc.or_(pc.equal(ends, -1), pc.equal(ends, pc.subtract(pc.binary_length(text), 4)))).as_py():
        return None  # lines after the empty one that ends a block
    lines = pc.split_pattern(pc.utf8_slice_codeunits(text, len(_VERSION_LINE)), "\r\n")
    flat = lines.flatten()
    pairs = pc.split_pattern(flat, ":", max_splits=1)
    names = pc.utf8_trim_whitespace(pc.list_element(pairs, 0))
    kept = pc.and_(pc.match_substring(flat, ":"), pc.greater(pc.utf8_length(names), 0))  # else skipped
    keys = pc.filter(names, kept)
    values = pc.utf8_trim_whitespace(pc.list_element(pc.filter(pairs, kept), 1))
    offsets = _segment_ends(pa, pc, kept, lines.offsets)
    counts = pc.subtract(offsets[1:], offsets[:-1])
    if (pc.max(counts).as_py() or 0) >= 2:
        several = pc.filter(pa.ListArray.from_arrays(offsets, keys), pc.greater_equal(counts, 2)).to_pylist()
        if any(len(set(row)) != len(row) for row in several):
            return None  # a repeated key: its values become one list, in order
    one_each = pa.ListArray.from_arrays(_counting(pa, len(values) + 1), values)
    headers = pa.MapArray.from_arrays(offsets, keys, one_each, type=map_type)
    is_id = pc.equal(keys, MSG_ID)
    id_ends = _segment_ends(pa, pc, is_id, offsets)
    has_id = pc.greater(pc.subtract(id_ends[1:], id_ends[:-1]), 0)
    where = pc.if_else(has_id, id_ends[:-1], pa.scalar(None, pa.int32()))
    return headers, pc.take(pc.filter(values, is_id), where)


def _counting(pa: Any, n: int) -> Any:
    """The int32 array ``0, 1, ..., n - 1`` (a slice of one kept array, grown as needed)."""
    global _COUNTING
    counting = _COUNTING  # read once: another thread may replace it meanwhile, with a shorter one
    if len(counting) < n:
        counting = _COUNTING = pa.array(range(max(n, 2 * len(counting), 1 << 14)), pa.int32())
    return counting[:n]


_COUNTING: Any = ()


def _segment_ends(pa: Any, pc: Any, mask: Any, offsets: Any) -> Any:
    """Offsets (int32) of the ``True`` values of ``mask`` taken alone, for segments of ``mask`` given
    by ``offsets``: element ``i`` counts the ``True`` values before ``offsets[i]``."""
    before = pa.concat_arrays([pa.array([0], pa.int32()),
                               pc.cumulative_sum(mask.cast(pa.int32())).cast(pa.int32())])
    return pc.take(before, offsets)
