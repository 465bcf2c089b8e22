"""Analyst-revision drift as a family (``strategies.analyst_revision``).

Its code embeds the rating actions the trusted side read from the alternative-data folder
(``--alt-data``, else the corpus layout above ``--data-dir``): during the search, only those
known by the in-sample end; the holdout node asks ``holdout_variant`` for the winner's code
with the actions through the holdout end, written beside its trial's source as
earnings_drift's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from altdata.corpus import DATASETS, AltData, find_alt_root
from altdata.pit import AltTable
from experiments.runfolder import holdout_code_file
from strategies.analyst_revision import GRID, KIND, EventTable, events, propose, reconcile, render
from strategies.codegen import code_sha256
from strategies.earnings_drift import date_key
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.spec import StrategySpec
from swarm.errors import UserInputError
from swarm.families import REGISTRY

TABLE = "ratings"
# Calendar days that surely hold the longest entry delay in bars (weekends, holidays).
WARMUP_MARGIN_DAYS = 2 * int(max(GRID["entry_delay"])) + 7


def alt_root(run: Any) -> Path | None:
    """The run's alternative-data folder: ``--alt-data``, else the nearest folder above
    ``--data-dir`` laid out like the corpus."""
    return run.config.alt_data or find_alt_root(run.config.data_dir)


class AnalystRevision:
    name = "analyst_revision"
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
        """Fresh specs for the route; none that would trade on the search's revisions exactly
        as its best or one of the last iteration's specs of this family does."""
        if n <= 0:
            return []
        table, start = (None, 0) if ctx.run is None else self.scored_events(ctx.run)
        tried = [spec for _, spec in ctx.last if spec.family.value == KIND]
        return propose(
            route=ctx.route,
            n=n,
            rng=ctx.rng,
            seen=ctx.seen,
            best=ctx.own_best,
            table=table,
            start=start,
            tried=tried,
        )

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with exactly its family\'s parameters, snapped to the grid."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The search's source: the actions known by the in-sample end, never later ones."""
        return render(spec, self.events(run, through=run.split.insample_end))

    def code_through(self, run: Any, spec: StrategySpec, day: date) -> str:
        """The source with the actions known by the close of ``day`` (a truncated re-run's);
        through the in-sample end it is ``code``."""
        return render(spec, self.events(run, through=day))

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The winner's source with the actions through the holdout end, written beside its
        trial's source (which stays as the ledger recorded it)."""
        spec = StrategySpec.model_validate(variant["spec"])
        code = render(spec, self.events(run, through=run.split.holdout_end))
        run.run.write_text(holdout_code_file(variant["variant_id"]), code)
        return variant | {"code": code, "code_sha256": code_sha256(code)}

    def screens(self, spec: StrategySpec) -> bool:
        """Never: the screen has no alternative data; its variants are backtested whole."""
        return False

    def events(self, run: Any, *, through: date) -> EventTable:
        """The run's symbols' revisions known by the close of ``through``, read once per run."""
        root = alt_root(run)
        table = self._table(root)
        key = (root, tuple(run.symbols), through)
        if key not in self._events:
            self._events[key] = events(table, run.symbols, through=through)
        return self._events[key]

    def scored_events(self, run: Any) -> tuple[EventTable, int]:
        """The search's revisions and the first day (yyyymmdd) whose trigger can place an
        order in a fold: the warm-up bars refuse orders, so a trigger before the first fold
        (less the longest entry delay, in calendar days) trades in no fold. Earlier revisions
        still count towards a consensus."""
        start = run.folds[0].start - timedelta(days=WARMUP_MARGIN_DAYS)
        return self.events(run, through=run.split.insample_end), date_key(start)

    def preflight(self, config: Any) -> None:
        """A run naming this family needs the rating actions: say so before it starts."""
        self._table(config.alt_data or find_alt_root(config.data_dir))

    def _table(self, root: Path | None) -> AltTable:
        if root is not None and root in self._tables:
            return self._tables[root]
        alt = AltData(root)
        table = alt.table(TABLE)
        if table is None or root is None:
            raise UserInputError(
                f"--families {KIND}: no analyst rating actions: {alt.missing(TABLE)}; pass "
                f"--alt-data DIR with {DATASETS[TABLE].source}"
            )
        self._tables[root] = table
        return table


REGISTRY.register(AnalystRevision())
