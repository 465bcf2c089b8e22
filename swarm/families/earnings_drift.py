"""Post-earnings-announcement drift as a family (``strategies.earnings_drift``).

Its code embeds the earnings reports the trusted side read from the alternative-data folder
(``--alt-data``, else the corpus layout above ``--data-dir``): during the search, only those
known by the in-sample end; the holdout node asks ``holdout_variant`` for the winner's code
with the reports through the holdout end, written beside its trial's source as the decision
pipeline's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from altdata.corpus import AltData, find_alt_root
from altdata.pit import AltTable
from experiments.runfolder import holdout_code_file
from strategies.codegen import code_sha256
from strategies.earnings_drift import (
    GRID,
    KIND,
    EventTable,
    events,
    propose,
    reconcile,
    render,
    since,
)
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.spec import StrategySpec
from swarm.errors import UserInputError
from swarm.families import REGISTRY

TABLE = "surprises"
# Calendar days that surely hold the longest entry delay in bars (weekends, holidays).
WARMUP_MARGIN_DAYS = 2 * int(max(GRID["entry_delay"])) + 7


def alt_root(run: Any) -> Path | None:
    """The run's alternative-data folder: ``--alt-data``, else the nearest folder above
    ``--data-dir`` laid out like the corpus."""
    return run.config.alt_data or find_alt_root(run.config.data_dir)


class EarningsDrift:
    name = "earnings_drift"
    kinds = (KIND,)
    scope: Scope = "symbol"
    self_proposing = True
    priority = 30
    repairable = False  # no block edit reshapes it: its own proposer moves its parameters

    def __init__(self) -> None:
        self._tables: dict[Path, AltTable] = {}
        self._events: dict[tuple[Path, tuple[str, ...], date], EventTable] = {}

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """All ``n`` when the run names only this family, half (at least one) beside others,
        none when it is not named."""
        if n <= 0 or KIND not in families:
            return 0
        return n if set(families) == {KIND} else max(1, n // 2)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Fresh specs for the route; none that would trade on the search's reports exactly as
        its best or one of the last iteration's specs of this family does."""
        if n <= 0:
            return []
        table = None if ctx.run is None else self.scored_events(ctx.run)
        tried = [spec for _, spec in ctx.last if spec.family.value == KIND]
        return propose(
            route=ctx.route,
            n=n,
            rng=ctx.rng,
            seen=ctx.seen,
            best=ctx.own_best,
            table=table,
            tried=tried,
        )

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with its parameters made consistent."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The search's source: the reports known by the in-sample end, never later ones."""
        return render(spec, self.events(run, through=run.split.insample_end))

    def code_through(self, run: Any, spec: StrategySpec, day: date) -> str:
        """The source with the reports known by the close of ``day`` (a truncated re-run's);
        through the in-sample end it is ``code``."""
        return render(spec, self.events(run, through=day))

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The winner's source with the reports through the holdout end, written beside its
        trial's source (which stays as the ledger recorded it)."""
        spec = StrategySpec.model_validate(variant["spec"])
        code = render(spec, self.events(run, through=run.split.holdout_end))
        run.run.write_text(holdout_code_file(variant["variant_id"]), code)
        return variant | {"code": code, "code_sha256": code_sha256(code)}

    def screens(self, spec: StrategySpec) -> bool:
        """Never: the screen does not read earnings data."""
        return False

    def events(self, run: Any, *, through: date) -> EventTable:
        """The run's symbols' reports known by the close of ``through``, read once per run."""
        root = alt_root(run)
        table = self._table(root)
        key = (root, tuple(run.symbols), through)
        if key not in self._events:
            self._events[key] = events(table, run.symbols, through=through)
        return self._events[key]

    def scored_events(self, run: Any) -> EventTable:
        """The search's reports that can place an order in a fold: the warm-up bars refuse
        orders, so a report first tradable before the first fold (less the longest entry
        delay, in calendar days) trades in no fold."""
        start = run.folds[0].start - timedelta(days=WARMUP_MARGIN_DAYS)
        return since(self.events(run, through=run.split.insample_end), start)

    def preflight(self, config: Any) -> None:
        """A run naming this family needs its earnings surprises: say so before it starts."""
        self._table(config.alt_data or find_alt_root(config.data_dir))

    def _table(self, root: Path | None) -> AltTable:
        if root is not None and root in self._tables:
            return self._tables[root]
        alt = AltData(root)
        table = alt.table(TABLE)
        if table is None or root is None:
            raise UserInputError(
                f"--families {KIND}: no earnings surprises: {alt.missing(TABLE)}; pass "
                "--alt-data DIR with analyst/earnings_surprises_2012_2019.csv"
            )
        self._tables[root] = table
        return table


REGISTRY.register(EarningsDrift())
