"""The contrarian put/call regime as a family (``strategies.putcall_regime``).

Its code embeds the CBOE put/call ratios the trusted side read from the alternative-data
folder (``--alt-data``, else the corpus layout above ``--data-dir``): during the search, only
those known by the in-sample end; the holdout node asks ``holdout_variant`` for the winner's
code with the ratios through the holdout end, written beside its trial's source. The corpus
series ends 2019-10-04: a window past it runs, and the strategy is flat after the last ratio
(a warning says so).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from altdata.corpus import DATASETS, AltData, find_alt_root
from altdata.pit import AltTable
from experiments.runfolder import holdout_code_file
from strategies.codegen import code_sha256
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.putcall_regime import (
    KIND,
    TABLE,
    Point,
    RatioSeries,
    flat_after,
    last_day,
    propose,
    reconcile,
    render,
    series,
)
from strategies.spec import StrategySpec
from swarm.errors import UserInputError
from swarm.families import REGISTRY


def alt_root(config: Any) -> Path | None:
    """The run's alternative-data folder: ``--alt-data``, else the nearest folder above
    ``--data-dir`` laid out like the corpus."""
    return config.alt_data or find_alt_root(config.data_dir)


def ends_message(points: tuple[Point, ...], end: date) -> str | None:
    """What a window ending ``end`` should know when the series goes flat before it."""
    flat = flat_after(points)
    if flat is not None and end <= flat:
        return None
    last = last_day(points)
    if last is None:
        return f"{KIND}: no put/call ratio known by {end}: the strategy stays flat"
    return (
        f"{KIND}: the put/call series ends (last ratio first tradable {last}); the strategy "
        f"is flat after {flat}, and the window runs to {end}"
    )


class PutCallRegime:
    name = "putcall_regime"
    kinds: tuple[str, ...] = (KIND,)
    scope: Scope = "symbol"
    self_proposing = True
    priority = 32
    repairable = False  # no block edit reshapes it: its own proposer moves its parameters

    def __init__(self) -> None:
        self._tables: dict[Path, AltTable] = {}
        self._series: dict[tuple[Path | None, date], RatioSeries] = {}
        self._warned: set[tuple[Path | None, date]] = set()  # the windows ``series`` judged

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """All ``n`` when the run names only this family, half (at least one) beside others,
        none when it is not named."""
        if n <= 0 or KIND not in families:
            return 0
        return n if set(families) == {KIND} else max(1, n // 2)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Up to ``n`` fresh specs for the route, none trading as one already tried does."""
        if n <= 0:
            return []
        return propose(route=ctx.route, n=n, rng=ctx.rng, seen=ctx.seen, best=ctx.own_best)

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with exactly its family\'s parameters, snapped to the grid."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The search's source: the ratios known by the in-sample end, never later ones."""
        return render(spec, self.series(run, through=run.split.insample_end))

    def code_through(self, run: Any, spec: StrategySpec, day: date) -> str:
        """The source with the ratios known by the close of ``day`` (a truncated re-run's);
        through the in-sample end it is ``code``. No warning that the series ends: a cut
        run's window ends early on purpose."""
        return render(spec, self._known(alt_root(run.config), day))

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The winner's source with the ratios through the holdout end, written beside its
        trial's source (which stays as the ledger recorded it)."""
        spec = StrategySpec.model_validate(variant["spec"])
        code = render(spec, self.series(run, through=run.split.holdout_end))
        run.run.write_text(holdout_code_file(variant["variant_id"]), code)
        return variant | {"code": code, "code_sha256": code_sha256(code)}

    def screens(self, spec: StrategySpec) -> bool:
        """Never: the screen has no alternative data; its variants are backtested whole."""
        return False

    def series(self, run: Any, *, through: date) -> RatioSeries:
        """The ratios known by the close of ``through``, read once per folder and day; a
        warning (once) when the window runs past the series."""
        root = alt_root(run.config)
        known, key = self._known(root, through), (root, through)
        if key not in self._warned:
            self._warned.add(key)
            message = ends_message(known[False], through)
            if message is not None:
                _warn(getattr(run, "progress", None), message)
        return known

    def _known(self, root: Path | None, through: date) -> RatioSeries:
        """The ratios under ``root`` known by the close of ``through``, read once per day."""
        key = (root, through)
        if key not in self._series:
            self._series[key] = series(self._table(root), through=through)
        return self._series[key]

    def preflight(self, config: Any) -> None:
        """A run naming this family needs the put/call ratios: say so before it starts, and
        say when its window runs past them."""
        table = self._table(alt_root(config))
        end = getattr(config, "end", None)
        if isinstance(end, date):
            message = ends_message(series(table, through=end)[False], end)
            if message is not None:
                _warn(None, message)

    def _table(self, root: Path | None) -> AltTable:
        if root is not None and root in self._tables:
            return self._tables[root]
        alt = AltData(root)
        table = alt.table(TABLE)
        if table is None or root is None:
            raise UserInputError(
                f"--families {KIND}: no put/call ratios: {alt.missing(TABLE)}; pass "
                f"--alt-data DIR with {DATASETS[TABLE].source}"
            )
        self._tables[root] = table
        return table


def _warn(progress: Any, message: str) -> None:
    """On the run's progress stream, else on stderr (before the run has one)."""
    if progress is not None:
        progress.warn(message)
    else:
        print(f"[warning] {message}", file=sys.stderr)


REGISTRY.register(PutCallRegime())
