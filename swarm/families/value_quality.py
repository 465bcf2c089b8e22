"""The value/quality cross-section as a family (``strategies.value_quality``).

One strategy over the whole universe (portfolio scope, like cross-sectional momentum). Its
code embeds the annual statements the trusted side read from the alternative-data folder
(``--alt-data``, else the corpus layout above ``--data-dir``): during the search, only those
known by the in-sample end; the holdout node asks ``holdout_variant`` for the winner's code
with the statements through the holdout end, written beside its trial's source. The corpus
statements cover period ends 2012-2016 for 15 tickers (none for GOOG/GOOGL/ORCL/AMD/TSLA):
a symbol without one is never ranked and a warning names it; a window past the last
statement plus ``max_age_days`` holds cash there.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from altdata.pit import TICKER, AltTable
from experiments.runfolder import holdout_code_file
from strategies.codegen import code_sha256
from strategies.family_api import Proposal, ProposalContext, Scope
from strategies.spec import StrategySpec
from strategies.value_quality import (
    KIND,
    SnapshotTable,
    covered,
    propose,
    reconcile,
    render,
    snapshots,
)
from swarm.errors import UserInputError
from swarm.families import REGISTRY
from swarm.families._alt_inputs import alt_root, required_table, warn

TABLE = "statements"
MIN_COVERED = 2  # a cross-section needs two symbols to rank


class ValueQuality:
    name = "value_quality"
    kinds: tuple[str, ...] = (KIND,)
    scope: Scope = "portfolio"
    self_proposing = True
    priority = 34
    repairable = False  # no block edit reshapes it: its own proposer moves its parameters

    def __init__(self) -> None:
        self._tables: dict[Path | None, AltTable] = {}
        self._snapshots: dict[tuple[Path | None, tuple[str, ...], date], SnapshotTable] = {}
        self._warned: set[tuple[Path | None, tuple[str, ...]]] = set()

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """All ``n`` when the run names only this family, half (at least one) beside others,
        none when it is not named or the universe has one symbol (nothing to rank)."""
        if n <= 0 or KIND not in families or n_symbols < MIN_COVERED:
            return 0
        return n if set(families) == {KIND} else max(1, n // 2)

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """Fresh specs for the route; none that would hold the same book as the best or one
        of the last iteration's specs of this family (a ``top_n`` past what the covered
        symbols allow)."""
        if n <= 0:
            return []
        n_ranked = None
        if ctx.run is not None:
            n_ranked = len(covered(self.snapshots(ctx.run, through=ctx.run.split.insample_end)))
        tried = [spec for _, spec in ctx.last if spec.family.value == KIND]
        return propose(
            route=ctx.route,
            n=n,
            rng=ctx.rng,
            seen=ctx.seen,
            best=ctx.own_best,
            n_ranked=n_ranked,
            tried=tried,
        )

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """The spec with exactly its family's parameters, snapped to the grid."""
        return reconcile(spec)

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The search's source: the statements known by the in-sample end, never later ones."""
        return render(spec, self.snapshots(run, through=run.split.insample_end))

    def code_through(self, run: Any, spec: StrategySpec, day: date) -> str:
        """The source with the statements known by the close of ``day`` (a truncated run's)."""
        return render(spec, self.snapshots(run, through=day))

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The winner's source with the statements through the holdout end, written beside
        its trial's source (which stays as the ledger recorded it)."""
        spec = StrategySpec.model_validate(variant["spec"])
        code = render(spec, self.snapshots(run, through=run.split.holdout_end))
        run.run.write_text(holdout_code_file(variant["variant_id"]), code)
        return variant | {"code": code, "code_sha256": code_sha256(code)}

    def screens(self, spec: StrategySpec) -> bool:
        """Never: the screen has no statements; its variants are backtested whole."""
        return False

    def snapshots(self, run: Any, *, through: date) -> SnapshotTable:
        """The run's symbols' statements known by the close of ``through``, read once per
        folder, universe and day; a warning (once per run) names the symbols never ranked."""
        root = alt_root(run.config)
        symbols = tuple(run.symbols)
        key = (root, symbols, through)
        if key not in self._snapshots:
            self._snapshots[key] = snapshots(self._table(root), symbols, through=through)
            missing = [s for s in symbols if not self._snapshots[key].get(s)]
            if missing and (root, symbols) not in self._warned:
                self._warned.add((root, symbols))
                warn(
                    getattr(run, "progress", None),
                    f"{KIND}: no statement known by {through} for {', '.join(missing)}: "
                    "never ranked, held in cash",
                )
        return self._snapshots[key]

    def preflight(self, config: Any) -> None:
        """A run naming this family needs annual statements: say so before it starts, and
        say when its tickers have too few to rank."""
        table = self._table(alt_root(config))
        tickers = list(getattr(config, "tickers", None) or [])
        if tickers:
            have = set(table.frame[TICKER])
            found = [t for t in tickers if t in have]
            if len(found) < MIN_COVERED:
                raise UserInputError(
                    f"--families {KIND}: {table.source} has statements for "
                    f"{', '.join(found) or 'none'} of {', '.join(tickers)}; a cross-section "
                    f"needs {MIN_COVERED}: add tickers it covers ("
                    f"{', '.join(table.tickers()[:12])}...) or drop the family"
                )

    def _table(self, root: Path | None) -> AltTable:
        """The statements of ``root``, read once (no folder, or none there: the error)."""
        if root not in self._tables:
            self._tables[root] = required_table(root, TABLE, KIND, "annual statements")
        return self._tables[root]


REGISTRY.register(ValueQuality())
