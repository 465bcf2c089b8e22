"""Market impact of a dated item: base close before it became known, never a bar after as_of."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from swarm.research.market_impact import (
    UNKNOWN_AFTER_AS_OF,
    UNKNOWN_NO_BASE,
    Impact,
    market_impact,
)

pytestmark = pytest.mark.unit

# NYSE sessions 2019-06-03 (Mon) .. 2019-06-14 (Fri); close 20:00 UTC (16:00 EDT).
DAYS = pd.bdate_range("2019-06-03", "2019-06-14")
CLOSES = pd.Series([100.0 + i for i in range(len(DAYS))], index=DAYS)
AS_OF = dt.date(2019, 6, 14)


def _at(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


@pytest.mark.parametrize(
    ("known_at", "base", "one_day", "five_day"),
    [
        # before the open (08:00 New York): the previous close is the base
        ("2019-06-05 12:00", "2019-06-04", "2019-06-05", "2019-06-11"),
        # during the session: still the previous close
        ("2019-06-05 17:00", "2019-06-04", "2019-06-05", "2019-06-11"),
        # after the close: that close is the base, the next session the first after
        ("2019-06-05 20:30", "2019-06-05", "2019-06-06", "2019-06-12"),
        # on a Saturday: Friday's close, then Monday's
        ("2019-06-08 15:00", "2019-06-07", "2019-06-10", "2019-06-14"),
    ],
)
def test_base_is_the_last_close_before_the_item(known_at, base, one_day, five_day) -> None:
    one, five = market_impact(CLOSES, _at(known_at), as_of=AS_OF)
    b = dt.date.fromisoformat(base)
    assert (one.start, one.end) == (b, dt.date.fromisoformat(one_day))
    assert (five.start, five.end) == (b, dt.date.fromisoformat(five_day))
    assert one.ret == pytest.approx(CLOSES[one_day] / CLOSES[base] - 1)
    assert five.ret == pytest.approx(CLOSES[five_day] / CLOSES[base] - 1)


def test_never_reads_a_bar_after_as_of() -> None:
    """Bars after as_of are passed (as a careless caller might) and carry a planted jump;
    a horizon ending after as_of is unknown, and one ending on as_of ignores the jump."""
    as_of = dt.date(2019, 6, 7)
    planted = CLOSES.copy()
    planted[planted.index > pd.Timestamp(as_of)] = 1e6
    one, five = market_impact(planted, _at("2019-06-07 12:00"), as_of=as_of)
    assert one == Impact(1, dt.date(2019, 6, 6), dt.date(2019, 6, 7), pytest.approx(104 / 103 - 1))
    assert five.ret is None and five.note == UNKNOWN_AFTER_AS_OF
    assert five.describe() == "5 sessions: unknown: after the research date"
    # truncating the bars at as_of gives the same answer: no bar after it was read
    assert market_impact(planted[: pd.Timestamp(as_of)], _at("2019-06-07 12:00"), as_of=as_of) == (
        one,
        five,
    )


def test_item_known_after_the_close_of_as_of_has_no_known_impact() -> None:
    one, five = market_impact(CLOSES, _at("2019-06-07 21:00"), as_of=dt.date(2019, 6, 7))
    assert one.note == five.note == UNKNOWN_AFTER_AS_OF
    assert one.start == dt.date(2019, 6, 7)


def test_no_close_before_the_item() -> None:
    (one,) = market_impact(CLOSES, _at("2019-06-01 12:00"), as_of=AS_OF, horizons=(1,))
    assert one.ret is None and one.note == UNKNOWN_NO_BASE
