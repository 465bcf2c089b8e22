"""Strategy families as plugins: one proposal type, one context, one protocol, one registry.

A family plugin owns one or more family names (``kinds``) and everything that differs between
families: how many of an iteration's slots it takes, what it proposes on each route, the code
a spec becomes, the code the sealed holdout runs, and whether the screen can tune it. The
strategy node, the backtest fan-out and the holdout ask the registry (``for_spec``) instead of
asking which kind a spec is.

The built-in plugins (block families, portfolio families, the decision pipeline) are registered
by ``swarm.families``: their proposers use the gate's analysis, a floor above this one. A new
family is one new module there (or anywhere) that calls ``registry.register(MyFamily())``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from strategies.param_space import DEFAULT_SPACE, ParamSpace
from strategies.spec import StrategySpec

if TYPE_CHECKING:
    from gate.contracts import FailureAnalysis, VariantEvaluation

Scope = Literal["symbol", "portfolio"]
DEFAULT_PRIORITY = 100
PORTFOLIO_LABEL = "PORTFOLIO"  # the ``symbol`` of a portfolio-scope job and its results

# A repairable family's moves (``FamilyPlugin.repair_moves``): (spec, hint, rng, the run's
# regime filters) -> each move's result (changed spec, what changed) or None, in priority order.
RepairMoves = Callable[
    [StrategySpec, str, random.Random, Collection[str]], list[tuple[StrategySpec, str] | None]
]

# Parameter sets around a parent: (parent, how many, trial keys to avoid) -> specs. The rules
# brain's grid moves by default; the strategy node passes the screen (``backtest.screen``).
Tuner = Callable[[StrategySpec, int, set[str]], list[StrategySpec]]


@dataclass(frozen=True)
class Proposal:
    """One spec to build, with its parent in the run's lineage and why it was proposed."""

    spec: StrategySpec
    parent_id: str | None
    why: str


@dataclass
class ProposalContext:
    """What a plugin may read when it proposes: the gate's route and analysis, the run's
    lineage, its named families and universe, and the run itself (its bars, memo and LLM)
    for the plugins that need them. ``seen`` holds every trial key so far (never modified by
    a plugin: the node adds the proposals)."""

    route: str
    rng: random.Random
    seen: set[str]
    families: list[str]  # the run's --families (or the directive's), as given
    n_symbols: int
    best: tuple[str, StrategySpec] | None = None  # the run's best
    own_best: tuple[str, StrategySpec] | None = None  # the plugin's own best (``own_best``)
    last: list[tuple[VariantEvaluation, StrategySpec]] = field(default_factory=list)
    failure: FailureAnalysis | None = None
    tuner: Tuner | None = None  # the screen around ``own_best``, when it reproduces it
    run: Any = None  # the RunContext (bars, memo, llm, config)
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the rules brain's brief
    space: ParamSpace = DEFAULT_SPACE  # the user's grid (--param-space) tuning moves within

    def with_(self, **changes: Any) -> ProposalContext:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)


@runtime_checkable
class FamilyPlugin(Protocol):
    """A strategy family (or a set of them) the lab can search.

    * ``name``: the plugin's id; ``kinds``: the family names it owns (``StrategySpec.family``);
      ``scope``: "symbol" (run on each symbol alone) or "portfolio" (the universe at once).
    * ``self_proposing``: True when only this plugin proposes around its specs (the rules
      brain's block mutators and its LLM never touch them). The catch-all plugin (the block
      families) is the one that is not.
    * ``repairable``: whether ``strategies.repair`` may reshape its specs along failing criteria,
      with the plugin's ``repair_moves(spec, hint, rng, regime_filters)`` (required then; e.g.
      ``strategies.repair.block_moves``).
    * ``slots(families, n, n_symbols)``: how many of the ``n`` remaining slots it takes.
    * ``propose(ctx, n)``: ``n`` fresh proposals (none whose trial key is in ``ctx.seen``).
    * ``reconcile(spec)``: exactly the parameters its code reads.
    * ``code(run, spec)``: the module source, or None to drop the proposal (e.g. a budget ran out).
    * ``holdout_variant(run, variant)``: the variant dict the sealed holdout runs.
    * ``screens(spec)``: whether the screen reproduces ``spec`` (False: tune by grid moves).

    An optional ``priority`` (default 100) orders the self-proposing plugins: lower first,
    then registration order (the decision pipeline 10, the portfolio families 20). An optional
    ``preflight(config)`` checks the family's own inputs when a run names it, before anything
    runs (raise ``swarm.errors.UserInputError`` naming the option and the fix). An optional
    ``code_through(run, spec, day)`` is the spec's source with the alternative data known by
    the close of ``day`` (the families that embed a data table; through the in-sample end it
    is ``code``): the lookahead check gives each truncated run the table cut at its last bar.
    An optional ``grid_parameters(kind)`` names the tunable grid parameters (``PARAM_SPACE``)
    a spec of ``kind`` can carry: what a ``--param-space`` file may narrow for that family.
    """

    name: str
    kinds: tuple[str, ...]
    scope: Scope
    self_proposing: bool
    repairable: bool

    def slots(self, families: Sequence[str], n: int, n_symbols: int) -> int:
        """How many of the ``n`` remaining slots the plugin takes."""

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        """``n`` fresh proposals (none whose trial key is in ``ctx.seen``)."""

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """``spec`` with exactly the parameters its code reads."""

    def code(self, run: Any, spec: StrategySpec) -> str | None:
        """The module source of ``spec``, or None to drop the proposal."""

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The variant dict the sealed holdout runs."""

    def screens(self, spec: StrategySpec) -> bool:
        """Whether the screen reproduces ``spec`` (False: tune by grid moves)."""


class FamilyRegistry:
    """The plugins in proposal order: the self-proposing ones in registration order, then the
    catch-all (the block families), which takes the slots the others leave."""

    def __init__(self) -> None:
        self._plugins: list[FamilyPlugin] = []
        self._by_kind: dict[str, FamilyPlugin] = {}

    def register(self, plugin: FamilyPlugin) -> FamilyPlugin:
        """Add ``plugin``; a family name two plugins claim is an error, and so is a second
        catch-all. Registering the same plugin twice is a no-op (a module imported twice)."""
        if any(p is plugin or p.name == plugin.name for p in self._plugins):
            return plugin
        taken = [k for k in plugin.kinds if k in self._by_kind]
        if taken:
            raise ValueError(
                f"family plugin {plugin.name!r}: {', '.join(taken)} already registered by "
                f"{self._by_kind[taken[0]].name!r}; give the family another name"
            )
        if not plugin.self_proposing and any(not p.self_proposing for p in self._plugins):
            raise ValueError(
                f"family plugin {plugin.name!r}: only one plugin may take the remaining slots "
                "(self_proposing=False); make it self-proposing"
            )
        for kind in plugin.kinds:
            self._by_kind[kind] = plugin
        self._plugins.append(plugin)
        return plugin

    def unregister(self, name: str) -> None:
        """Remove the plugin called ``name`` (a test's toy family); unknown names are ignored.
        Specs of its kinds stay valid pydantic-wise but no longer find a plugin."""
        self._plugins = [p for p in self._plugins if p.name != name]
        self._by_kind = {k: p for k, p in self._by_kind.items() if p.name != name}

    def __iter__(self) -> Iterator[FamilyPlugin]:
        """Proposal order: the self-proposing plugins by priority (then as registered), the
        catch-all last."""
        own = sorted(
            (p for p in self._plugins if p.self_proposing),
            key=lambda p: getattr(p, "priority", DEFAULT_PRIORITY),
        )
        return iter(own + [p for p in self._plugins if not p.self_proposing])

    def for_kind(self, kind: str) -> FamilyPlugin:
        """The plugin that owns family ``kind``; KeyError naming the known ones otherwise."""
        try:
            return self._by_kind[str(getattr(kind, "value", kind))]
        except KeyError:
            raise KeyError(
                f"no family plugin owns {kind!r}; known: {', '.join(self.known())}"
            ) from None

    def for_spec(self, spec: StrategySpec) -> FamilyPlugin:
        """The plugin that owns ``spec``'s family."""
        return self.for_kind(spec.family.value)

    def owns(self, plugin: FamilyPlugin, spec: StrategySpec) -> bool:
        """Whether ``plugin`` is the one that owns ``spec``'s family."""
        return self._by_kind.get(spec.family.value) is plugin

    def known(self) -> list[str]:
        """Every family name ``--families`` accepts, block families first."""
        return [k for p in self._ordered_for_names() for k in p.kinds]

    def _ordered_for_names(self) -> list[FamilyPlugin]:
        """The block families first, then the others in proposal order (``--families``' list)."""
        ordered = list(self)
        return (
            ordered[-1:] + ordered[:-1] if ordered and not ordered[-1].self_proposing else ordered
        )

    def catch_all(self) -> FamilyPlugin:
        """The plugin that is not self-proposing (the block families)."""
        for p in self._plugins:
            if not p.self_proposing:
                return p
        raise LookupError("no catch-all family plugin registered (the block families)")

    # -- questions every consumer asks, answered by the spec's plugin

    def scope_of(self, spec: StrategySpec) -> Scope:
        """Whether ``spec`` runs per symbol or on the whole universe."""
        return self.for_spec(spec).scope

    def job_symbols(self, spec: StrategySpec, symbols: Sequence[str]) -> list[str]:
        """What a variant of ``spec`` runs on: each symbol alone, or (portfolio scope) the
        whole universe at once, under the portfolio label."""
        return [PORTFOLIO_LABEL] if whole_universe(self.scope_of(spec)) else list(symbols)

    def rules_mutable(self, spec: StrategySpec) -> bool:
        """Whether the rules brain's block mutators (and its LLM revisions) may touch ``spec``:
        catalogue specs of the catch-all only, never an LLM's own code."""
        return not spec.is_custom and not self.for_spec(spec).self_proposing

    def repairable(self, spec: StrategySpec) -> bool:
        """Whether ``strategies.repair`` may reshape ``spec`` (never an LLM's own code)."""
        return not spec.is_custom and self.for_spec(spec).repairable

    def repair_moves(self, spec: StrategySpec) -> RepairMoves | None:
        """The moves ``strategies.repair.repairs`` reshapes ``spec`` with (its plugin's
        ``repair_moves``), or None when the spec is not repairable."""
        if not self.repairable(spec):
            return None
        plugin = self.for_spec(spec)
        moves = getattr(plugin, "repair_moves", None)
        if moves is None:
            raise TypeError(
                f"family plugin {plugin.name!r} is repairable but has no "
                "repair_moves; give it one (strategies.repair.block_moves) or repairable=False"
            )
        return moves

    def reconcile(self, spec: StrategySpec) -> StrategySpec:
        """``spec`` reconciled by its plugin."""
        return self.for_spec(spec).reconcile(spec)

    def holdout_variant(self, run: Any, variant: dict[str, Any]) -> dict[str, Any]:
        """The variant dict the sealed holdout runs, as ``variant``'s plugin makes it."""
        spec = StrategySpec.model_validate(variant["spec"])
        return self.for_spec(spec).holdout_variant(run, variant)

    def grid_parameters(self) -> dict[str, frozenset[str]]:
        """Each family's tunable grid parameters, what ``--param-space`` may narrow (its
        plugin's optional ``grid_parameters(kind)``), by family name; families without any
        (their parameters are not on the grid) are left out."""
        out: dict[str, frozenset[str]] = {}
        for plugin in self._plugins:
            grid = getattr(plugin, "grid_parameters", None)
            if grid is None:
                continue
            for kind in plugin.kinds:
                if names := grid(kind):
                    out[kind] = frozenset(names)
        return dict(sorted(out.items()))

    def code_at(self, run: Any, spec: StrategySpec) -> Callable[[date], str] | None:
        """Day -> ``spec``'s source with the alternative data known by that day's close (its
        plugin's optional ``code_through``); None when the plugin embeds no such data, the
        family has no plugin, or the code is an LLM's own (no plugin renders it)."""
        plugin = self._by_kind.get(spec.family.value)
        through = getattr(plugin, "code_through", None)
        if through is None or spec.is_custom:
            return None

        def at(day: date) -> str:
            return through(run, spec, day)

        return at

    def preflight(self, config: Any) -> None:
        """Each family the run names checks its own inputs (its optional ``preflight``), so
        a missing input is an exit 2 at start-up, not an error mid-run."""
        for name in dict.fromkeys(getattr(config, "families", None) or []):
            plugin = self._by_kind.get(name)
            check = getattr(plugin, "preflight", None)
            if check is not None:
                check(config)


def whole_universe(scope: str | StrategySpec | None) -> bool:
    """Whether a scope (or a spec's) runs on the whole universe at once ("portfolio"), not on
    each symbol alone: the one place a scope is compared, so a new scope changes one line."""
    value = scope.scope if isinstance(scope, StrategySpec) else scope
    return value == "portfolio"


def own_best(
    registry: FamilyRegistry,
    plugin: FamilyPlugin,
    best: tuple[str, StrategySpec] | None,
    last: Sequence[tuple[VariantEvaluation, StrategySpec]],
    rank: Callable[[VariantEvaluation], Any],
) -> tuple[str, StrategySpec] | None:
    """A self-proposing plugin's parent: the run's best if it is one of its specs, else its
    best-ranked variant of the last iteration (``rank``: the gate's rank key)."""
    if best is not None and registry.owns(plugin, best[1]):
        return best
    mine = [(ev, spec) for ev, spec in last if registry.owns(plugin, spec)]
    if not mine:
        return None
    ev, spec = max(mine, key=lambda p: rank(p[0]))
    return ev.variant_id, spec
