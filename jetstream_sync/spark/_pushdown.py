# Subject filters of a Spark query pushed down into the read of the "jetstream" data source (PySpark >= 4.1
# hands a Python source the query's filters through DataSourceReader.pushFilters).
# Rule 1: never a wrong row: a filter is reported pushed only when the NATS subject filters the read uses
#         select exactly the rows it keeps; anything else stays with Spark (a filter kept by Spark may still
#         narrow the read to a superset of its rows). The filters of one read never overlap, so no message
#         is read twice.
# Rule 2: the shapes pushed are literal subjects (=, <=>, IN) and "prefix." (LIKE 'prefix.%': the NATS
#         filter "prefix.>"); literal subjects and "prefix.>" filters either nest or are disjoint, so their
#         intersections stay exact; a partial overlap with a wildcard ``subject`` option is not pushed.
# Rule 3: pure functions on strings plus the filter classes of pyspark (imported guarded: older PySpark
#         has none, and then nothing is pushed); no I/O.
"""Which of a query's filters become the NATS subject filters of a ``jetstream`` read."""

from __future__ import annotations

import sys
from typing import Any, Iterable

try:  # PySpark >= 4.1: filter pushdown for Python data sources
    from pyspark.sql.datasource import EqualNullSafe, EqualTo, In, StringStartsWith
except ImportError:  # pragma: no cover - PySpark 4.0: no filters are ever handed to the source
    EqualNullSafe = EqualTo = In = StringStartsWith = None  # type: ignore[assignment,misc]

#: The Spark SQL setting without which PySpark hands no filters to a Python data source.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
#: The PySpark worker that calls ``pushFilters`` (it runs only when ``PUSHDOWN_CONF`` is true).
_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"
_COLUMN = ("subject",)


def supported() -> bool:
    """Whether this PySpark hands filters to Python data sources at all (4.1 and later)."""
    return EqualTo is not None


def in_pushdown_planning() -> bool:
    """Whether this process is PySpark's filter pushdown worker.

    PySpark refuses to plan a read with a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, and only starts this worker when it is
    true: the source offers pushdown here, and only here, so a session with the setting off reads
    exactly as before."""
    if not supported():
        return False
    if _PUSHDOWN_WORKER in sys.modules:
        return True
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == _PUSHDOWN_WORKER


def is_literal(subject: Any) -> bool:
    """A subject a message can be stored on: non-empty tokens, no wildcard token, no white space."""
    if not isinstance(subject, str) or not subject:
        return False
    if any(ch.isspace() for ch in subject):
        return False
    return all(token and token not in ("*", ">") for token in subject.split("."))


def covers(outer: str, inner: str) -> bool:
    """Whether every subject the NATS filter ``inner`` matches is matched by ``outer``."""
    to, ti = outer.split("."), inner.split(".")
    for i, x in enumerate(to):
        if x == ">":
            return i < len(ti)
        if i >= len(ti) or ti[i] == ">":
            return False
        if x != "*" and x != ti[i]:
            return False
    return len(to) == len(ti)


def overlaps(a: str, b: str) -> bool:
    """Whether some subject is matched by both NATS filters."""
    ta, tb = a.split("."), b.split(".")
    for x, y in zip(ta, tb):
        if x == ">" or y == ">":
            return True
        if x != "*" and y != "*" and x != y:
            return False
    return len(ta) == len(tb)


def intersect(current: tuple[str, ...] | None, wanted: tuple[str, ...]) -> tuple[str, ...] | None:
    """The filters matching what both ``current`` (None: every subject) and ``wanted`` match, or None
    when that cannot be written as non-overlapping NATS filters. Order follows ``current``."""
    if current is None:
        current = (">",)
    out: list[str] = []
    for a in current:
        for b in wanted:
            if covers(a, b):
                both = b
            elif covers(b, a):
                both = a
            elif not overlaps(a, b):
                continue
            else:
                return None  # e.g. "orders.*.new" and "orders.eu.>": "orders.eu.new" is not among the filters
            if both not in out:
                out.append(both)
    for i, a in enumerate(out):
        if any(overlaps(a, b) for b in out[i + 1:]):
            return None
    return tuple(out)


def _wanted(flt: Any) -> tuple[tuple[str, ...], bool] | None:
    """(NATS filters that select a superset of the rows ``flt`` keeps, whether exactly those rows),
    or None when ``flt`` says nothing usable about the subject."""
    if getattr(flt, "attribute", None) != _COLUMN:
        return None
    if isinstance(flt, (EqualTo, EqualNullSafe)):
        # A value that is no storable subject matches no message, but SQL decides that, not a filter.
        return ((flt.value,), True) if is_literal(flt.value) else None
    if isinstance(flt, In):
        values = [v for v in flt.value if v is not None]  # NULL in an IN list never matches
        if not values or not all(is_literal(v) for v in values):
            return None
        return tuple(dict.fromkeys(values)), True
    if isinstance(flt, StringStartsWith):
        prefix = flt.value
        if not isinstance(prefix, str):
            return None
        if prefix.endswith(".") and is_literal(prefix[:-1]):
            return (prefix + ">",), True  # whole tokens follow the prefix: exactly "prefix.>"
        head = prefix[:prefix.rfind(".")] if "." in prefix else ""
        if is_literal(head):
            return (head + ".>",), False  # "orders.eu%" also keeps "orders.europe": read "orders.>", Spark cuts
    return None


def push(filters: Iterable[Any], option_subject: str | None) -> tuple[tuple[str, ...] | None, list[Any]]:
    """(The subject filters a read uses instead of ``option_subject``, or None to keep it; the filters
    Spark must still apply). ``()`` means no message can match: the read is empty."""
    current: tuple[str, ...] | None = None if option_subject is None else (option_subject,)
    narrowed = False
    rest = []
    for flt in filters:
        wanted = _wanted(flt)
        both = None if wanted is None else intersect(current, wanted[0])
        if both is None:
            rest.append(flt)
            continue
        current, narrowed = both, True
        if not wanted[1]:
            rest.append(flt)
    return (current if narrowed else None), rest
