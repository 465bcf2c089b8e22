"""A pandas feed for Backtrader that loads the same values as ``bt.feeds.PandasData``, faster.

``PandasData._load`` reads every field of every bar with ``DataFrame.iloc[row, col]``
(~10 us each): over a third of a short daily backtest went there. ``FramePandasData``
converts the columns and the timestamps to Python lists once, in ``start``, and
``_load`` only copies them into the lines. Everything else (``load``'s session,
timezone and filter handling, preloading, ``_colmapping``) is PandasData's own, and the
values are the same doubles and the same date numbers (``date2num`` of the same
datetimes), so results are bit-identical to a plain-backtrader run with
``PandasData``: an exported strategy reproduces its recorded final value.
"""

from __future__ import annotations

from typing import Any

from backtest.compat import import_backtrader

bt = import_backtrader()


class FramePandasData(bt.feeds.PandasData):  # type: ignore[name-defined]  # bt is the patched module
    """``bt.feeds.PandasData`` with list-backed loading (same parameters, same values)."""

    def start(self) -> None:
        """Read the frame's columns into lists once, so ``_load`` only indexes."""
        super().start()  # resolves _colmapping to column positions, resets _idx
        df = self.p.dataname
        fields: list[tuple[Any, list[float]]] = []
        for alias in self.getlinealiases():
            if alias == "datetime":
                continue
            col = self._colmapping[alias]
            if col is None:  # signalled missing: PandasData leaves the line untouched
                continue
            # tolist() gives the float64 cells as Python floats: the same doubles iloc returns
            fields.append((getattr(self.lines, alias), df.iloc[:, col].tolist()))
        self._fields = fields
        dtcol = self._colmapping["datetime"]
        stamps = df.index if dtcol is None else df.iloc[:, dtcol]
        date2num = bt.date2num
        self._nums = [date2num(ts.to_pydatetime()) for ts in stamps]
        self._rows = len(df)

    def _load(self) -> bool:
        self._idx += 1
        i = self._idx
        if i >= self._rows:
            return False
        for line, values in self._fields:
            line[0] = values[i]
        self.lines.datetime[0] = self._nums[i]
        return True
