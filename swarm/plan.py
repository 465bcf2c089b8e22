"""Directive -> the run's typed plan: read (rules, or the LLM when configured), then checked
against the data that exists (``swarm.universe``).

With ``--llm``, the model reads the directive into ``LLMPlan`` (structured output); its reading
is rebuilt through the same vocabulary and resolved against the data like the rules' one, and
the rules' plan is the fallback when the model fails, answers outside the vocabulary, or names
a universe with no data. Without it, the rules read alone.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from strategies.regime import REGIME_STYLE
from strategies.taxonomy import STYLES
from swarm.directive import SECTORS, DirectiveError, Plan, parse_directive
from swarm.universe import Inventory, inventory, resolve_universe


class LLMPlan(BaseModel):
    """How the model reads a directive. Every field is drawn from the lab's vocabulary."""

    styles: list[str] = Field(
        description="strategy styles named, from: " + ", ".join(STYLES) + " (empty: none named)"
    )
    universe_terms: list[str] = Field(
        description="sector, industry or asset-class words, from: " + ", ".join(SECTORS)
    )
    tickers: list[str] = Field(description="explicit ticker symbols named, upper case")
    timeframe: Literal["1d", "1h"] = Field(description="bar size: 1h for hourly/intraday")
    scope: list[str] = Field(description="from: long_only, long_short, market_neutral, portfolio")
    benchmark: str | None = Field(
        None, description="cash (absolute return, market neutral), buy-and-hold, or a symbol"
    )


def build_plan(
    directive: str,
    *,
    data_dir: Path | None,
    source: str,
    offline: bool,
    timeframe: str | None = None,
    tickers: list[str] | None = None,
    cache_dir: Path | None = None,
    llm: Any = None,
) -> Plan:
    """The plan the run follows. ``timeframe``/``tickers``: the CLI's overrides (None: the
    directive's). ``llm``: an ``LLMClient`` or None. Raises DirectiveError (exit 2)."""
    rules = parse_directive(directive)
    read = _llm_plan(llm, rules) if llm is not None else None
    candidates = [read, rules] if read is not None else [rules]
    for k, plan in enumerate(candidates):
        try:
            return _resolved(
                plan,
                data_dir=data_dir,
                source=source,
                offline=offline,
                timeframe=timeframe,
                tickers=tickers,
                cache_dir=cache_dir,
            )
        except DirectiveError as exc:
            if k == len(candidates) - 1:
                raise
            rules.notes.append(f"the LLM's reading was set aside ({exc}); the rules' plan stands")
    raise AssertionError("unreachable")  # pragma: no cover


def _resolved(
    plan: Plan,
    *,
    data_dir: Path | None,
    source: str,
    offline: bool,
    timeframe: str | None,
    tickers: list[str] | None,
    cache_dir: Path | None,
) -> Plan:
    if timeframe is not None and timeframe != plan.timeframe:
        notes = list(plan.notes)
        if plan.timeframe_source == "directive":
            notes.append(f"--timeframe {timeframe} overrides the directive's {plan.timeframe}")
        plan = plan.model_copy(
            update={"timeframe": timeframe, "timeframe_source": "--timeframe", "notes": notes}
        )
    if tickers is not None:
        return plan.model_copy(update={"tickers": list(tickers), "universe_source": "--tickers"})
    inv = inventory(
        data_dir=data_dir,
        source=source,
        timeframe=plan.timeframe,
        offline=offline,
        cache_dir=cache_dir,
    )
    return resolve_universe(plan, inv)


def plan_summary(
    plan: Plan, *, start: date, end: date, benchmark: str, families: list[str]
) -> dict[str, Any]:
    """The plan as ``--dry-run`` prints it and report.md heads with it."""
    return {
        "directive": plan.directive,
        "universe": plan.tickers,
        "universe_source": plan.universe_source,
        "timeframe": plan.timeframe,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "styles": plan.styles,
        "families": [f for f in plan.preferred_families if f != REGIME_STYLE],
        "regime_filter": REGIME_STYLE in plan.preferred_families,
        "run_families": families,
        "benchmark": benchmark,
        "scope": plan.scope,
        "understood": plan.understood,
        "ignored": plan.ignored,
        "notes": plan.notes,
        "read_by": plan.read_by,
    }


# -- the LLM's reading ----------------------------------------------------------------------


def _llm_plan(client: Any, rules: Plan) -> Plan | None:
    """The model's reading rebuilt as a Plan, or None (the rules' plan stands)."""
    from swarm.llm.masked import MaskedClient
    from swarm.llm.retry import ask_with_retry

    # A masked directive shows "[sector]" where it named an industry: the model cannot read
    # it, so the rules' reading of the universe stands when the model names none.
    masked = isinstance(client, MaskedClient)
    messages = [
        (
            "system",
            "You read a quant researcher's directive into a typed plan. Use only the "
            "vocabulary each field lists; leave a field empty when the directive is "
            "silent.",
        ),
        ("human", f"Directive: {rules.directive}"),
    ]

    def check(ans: LLMPlan) -> tuple[Plan | None, str | None]:
        unknown = [s for s in ans.styles if s not in STYLES]
        unknown += [t for t in ans.universe_terms if t not in SECTORS]
        if unknown:
            return None, f"not in the vocabulary: {', '.join(unknown)}"
        families: list[str] = []
        for style in ans.styles:
            families += [f for f in STYLES[style].families if f not in families]
        if REGIME_STYLE in rules.preferred_families:
            families.append(REGIME_STYLE)
        explicit = [t.upper().lstrip("$") for t in ans.tickers]
        return rules.model_copy(
            update={
                "styles": list(ans.styles),
                "preferred_families": families,
                "style": next(iter(families), "any"),
                "universe_terms": list(ans.universe_terms)
                or (list(rules.universe_terms) if masked else []),
                "explicit_tickers": explicit,
                "timeframe": ans.timeframe,
                "timeframe_source": "directive",
                "scope": list(ans.scope),
                "benchmark": ans.benchmark,
                "read_by": "llm",
            }
        ), None

    value, _reasons = ask_with_retry(client, "plan", messages, LLMPlan, check)
    return value


def llm_client_for_plan(
    settings: Any,
    *,
    start: Any = None,
    end: Any = None,
    tickers: list[str] | None = None,
    data_dir: Path | None = None,
) -> Any:
    """An LLMClient for the plan's one call (cached in --llm-cache, else a temporary folder),
    masked as the run's prompts are when the run masks: the tickers the directive or
    ``--tickers`` name become aliases (mapped back in the answer), years and the corpus's
    names and sectors leave the directive."""
    import shutil
    import tempfile
    import weakref

    from swarm.llm.client import LLMClient
    from swarm.llm.cutoff import policy_for

    cache = settings.cache_dir or Path(tempfile.mkdtemp(prefix="swarm-plan-"))
    client = LLMClient(settings, cache_dir=cache)
    if not settings.cache_dir:  # the one call's own folder: gone with the client
        weakref.finalize(client, shutil.rmtree, cache, ignore_errors=True)
    policy = policy_for(settings, start)
    if policy is None or not policy.masked:
        return client
    from swarm.llm.mask import context_for, known_entities
    from swarm.llm.masked import MaskedClient

    anchor = end or start or "1970-01-01"  # no date in the directive survives either way
    ctx = context_for(list(tickers or []), anchor, known=known_entities(data_dir))
    return MaskedClient(client, ctx)


__all__ = ["Inventory", "LLMPlan", "Plan", "DirectiveError", "build_plan", "plan_summary"]
