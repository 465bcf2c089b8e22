"""User quality criteria: parsing ``"sharpe>=1.0,max_drawdown_pct<=20"``, measuring attainment."""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import dataclass

from backtest.contracts import Metrics
from gate.alpha import ALPHA_CRITERIA, AlphaStats, criteria_value
from gate.contracts import Criteria, Criterion
from gate.errors import CriteriaError

# alpha_t>=2 puts the edge over the benchmark into the fuzzy score (and so into the
# trajectory the router reads): a design that only holds the market scores low however high
# its Sharpe, and a refinement that trades Sharpe for alpha reads as progress.
DEFAULT_CRITERIA_TEXT = (
    "sharpe>=1.0,max_drawdown_pct<=20,win_rate_pct>=40,profit_factor>=1.2,alpha_t>=2,min_trades>=30"
)
OPS = (">=", "<=", ">", "<")
# One wording of the two options for every CLI that takes them (develop, judge, calibrate).
CRITERIA_HELP = (
    "gate criteria laid over the defaults (" + DEFAULT_CRITERIA_TEXT + "): a rule for a metric "
    "and direction already there replaces it, any other is added; min_trades, score, dsr, "
    'deflated_alpha and spa_p set those thresholds, e.g. "sharpe>=0.8,beta<=0.6"'
)
CRITERIA_REPLACE_HELP = (
    "--criteria's rules replace the default rules instead of adding to them (thresholds it "
    "does not name, min_trades included, keep their defaults)"
)
# Names that set Criteria fields instead of adding a metric rule.
SPECIAL = {
    "min_trades": "min_trades",
    "score": "score_threshold",
    "dsr": "dsr_threshold",
    "deflated_alpha": "deflated_alpha_threshold",
    "spa_p": "spa_threshold",
}
UPPER_BOUNDS = {"spa_p"}  # special names that cap a value ("spa_p<=0.05"); the rest floor it
ATTAINMENT_MAX = 2.0  # attainment universe is 0..2: 1 = exactly at the threshold

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_ITEM = re.compile(rf"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*({_NUMBER})\s*$")


def _is_numeric(annotation: object) -> bool:
    if annotation in (int, float):
        return True
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(a in (int, float) for a in typing.get_args(annotation))
    return False


def valid_metric_names() -> list[str]:
    """Names a rule may use: the numeric Metrics fields in declaration order, then the
    figures against the benchmark (``alpha_t``, ``beta``, ``information_ratio``...)."""
    own = [n for n, f in Metrics.model_fields.items() if _is_numeric(f.annotation)]
    return own + [n for n in ALPHA_CRITERIA if n not in own]


def _parse_items(text: str) -> tuple[list[Criterion], dict[str, float | int]]:
    """The metric rules and the special thresholds (Criteria field -> value) of ``text``."""
    valid = valid_metric_names()
    rules: list[Criterion] = []
    extra: dict[str, float | int] = {}
    for raw in text.split(","):
        if not raw.strip():
            continue  # tolerate "a>=1,,b<=2" and a trailing comma
        m = _ITEM.match(raw)
        if m is None:
            raise CriteriaError(
                f"cannot parse criterion {raw.strip()!r}: expected the form 'metric>=number' "
                f"(operators {', '.join(OPS)}), e.g. 'sharpe>=1.0'"
            )
        name, op, num = m.group(1).lower(), m.group(2), float(m.group(3))
        if name in SPECIAL:
            want = ("<=", "<") if name in UPPER_BOUNDS else (">=", ">")
            if op not in want:
                raise CriteriaError(
                    f"{name!r} only takes '{want[0]}', e.g. '{name}{want[0]}{num:g}'"
                )
            if name == "min_trades":
                if num < 0 or num != int(num):
                    raise CriteriaError(f"min_trades must be a whole number >= 0, got {num:g}")
                extra["min_trades"] = int(num)
            else:
                if not 0.0 <= num <= 1.0:
                    raise CriteriaError(f"{name} threshold must be within 0..1, got {num:g}")
                extra[SPECIAL[name]] = num
            continue
        if name not in valid:
            raise CriteriaError(
                f"unknown metric {name!r} in {raw.strip()!r}; valid metrics: "
                f"{', '.join(valid + list(SPECIAL))}"
            )
        rules.append(Criterion(metric=name, op=op, threshold=num))
    return rules, extra


def parse_criteria(text: str | None) -> Criteria:
    """Parse comma-separated ``metric OP number`` items; ``None``/blank -> the defaults.

    The rules are exactly ``text``'s (what ``--criteria-replace`` asks for); thresholds it
    does not name (``min_trades``, ``dsr``...) keep the ``Criteria`` model's defaults."""
    if text is None or not text.strip():
        text = DEFAULT_CRITERIA_TEXT
    rules, extra = _parse_items(text)
    if not rules:
        raise CriteriaError(f"no metric rule in {text!r}: add at least one, e.g. 'sharpe>=1.0'")
    return Criteria(rules=rules, **extra)


def _rule_key(c: Criterion) -> tuple[str, bool]:
    """A rule's identity for merging: its metric and direction (a floor or a cap), so
    ``sharpe>0.5`` replaces ``sharpe>=1`` while ``beta>=0.2`` and ``beta<=0.8`` coexist."""
    return c.metric, c.op in (">=", ">")


def merge_criteria(defaults: Criteria, text: str) -> Criteria:
    """``defaults`` with ``text`` laid over them (what ``--criteria`` asks for).

    A user rule replaces the default rule of the same metric and direction in its place;
    any other user rule is added after the defaults. Special names (``min_trades``,
    ``score``, ``dsr``, ``deflated_alpha``, ``spa_p``) override those thresholds. Within
    ``text`` a later rule of the same metric and direction wins. A text of special names
    only is valid here: the defaults supply the rules.
    """
    user, extra = _parse_items(text)
    merged = list(defaults.rules)
    for rule in user:
        at = next((i for i, c in enumerate(merged) if _rule_key(c) == _rule_key(rule)), None)
        if at is None:
            merged.append(rule)
        else:
            merged[at] = rule
    return Criteria(rules=merged, **{**defaults.model_dump(exclude={"rules"}), **extra})


def default_criteria(base: str = "") -> Criteria:
    """The lab's default criteria, with ``base`` (an asset class's own bars, e.g. crypto's
    drawdown cap: ``swarm.asset_defaults``) laid over them."""
    defaults = parse_criteria(None)
    return merge_criteria(defaults, base) if base.strip() else defaults


def criteria_from_text(text: str | None, *, replace: bool = False, base: str = "") -> Criteria:
    """The criteria of ``--criteria TEXT`` (merged over the defaults) or, with ``replace``
    (``--criteria-replace``), of TEXT alone; no text: exactly the defaults. ``base``: the
    asset class's bars over the lab's defaults (dropped with them by ``replace``)."""
    if text is None or not text.strip():
        return default_criteria(base)
    return parse_criteria(text) if replace else merge_criteria(default_criteria(base), text)


def special_labels(c: Criteria) -> dict[str, str]:
    """The special thresholds as rules read (``min_trades>=30``...), keyed by special name."""
    return {
        name: f"{name}{'<=' if name in UPPER_BOUNDS else '>='}{getattr(c, field):g}"
        for name, field in SPECIAL.items()
    }


@dataclass(frozen=True)
class CriteriaSources:
    """Where each bar of a run's criteria came from, for the report to say.

    ``user``: the labels the user's text set (rules, then special thresholds);
    ``defaults``: the default labels still in force; ``displaced``: the default labels the
    user's text overrode or (``replaced``) dropped."""

    user: list[str]
    defaults: list[str]
    displaced: list[str]
    replaced: bool


def criteria_sources(
    text: str | None, *, replace: bool = False, defaults: str = ""
) -> CriteriaSources:
    """Which bars of ``criteria_from_text(text, replace=replace, base=defaults)`` are the
    user's (``defaults``: the asset class's bars, counted with the lab's defaults)."""
    base = default_criteria(defaults)
    base_specials = special_labels(base)
    if text is None or not text.strip():
        labels = [rule_label(r) for r in base.rules] + list(base_specials.values())
        return CriteriaSources(user=[], defaults=labels, displaced=[], replaced=False)
    user_rules, extra = _parse_items(text)
    named = [n for n, field in SPECIAL.items() if field in extra]
    final = criteria_from_text(text, replace=replace, base=defaults)
    final_specials = special_labels(final)
    keys = {_rule_key(r) for r in user_rules}
    if replace:
        kept = []
        dropped = [rule_label(r) for r in base.rules]
    else:
        kept = [rule_label(r) for r in base.rules if _rule_key(r) not in keys]
        dropped = [rule_label(r) for r in base.rules if _rule_key(r) in keys]
    return CriteriaSources(
        user=[rule_label(r) for r in final.rules if _rule_key(r) in keys]
        + [final_specials[n] for n in named],
        defaults=kept + [lab for n, lab in base_specials.items() if n not in named],
        displaced=dropped + [base_specials[n] for n in named],
        replaced=replace,
    )


def rule_label(c: Criterion) -> str:
    """Stable key for a rule, used in ``VariantEvaluation.criteria_met``."""
    return f"{c.metric}{c.op}{c.threshold:g}"


def metric_value(
    metrics: Metrics | None, name: str, alpha: AlphaStats | None = None
) -> float | None:
    """The figure a rule names: a Metrics field, or (``alpha_t``, ``beta``...) an AlphaStats one."""
    if name in ALPHA_CRITERIA:
        return criteria_value(alpha, name)
    if metrics is None:
        return None
    v = getattr(metrics, name, None)
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def is_met(c: Criterion, value: float | None) -> bool:
    """Whether ``value`` meets ``c`` (a missing value never does)."""
    if value is None:
        return False
    return {
        ">=": value >= c.threshold,
        ">": value > c.threshold,
        "<=": value <= c.threshold,
        "<": value < c.threshold,
    }[c.op]


def attainment(c: Criterion, value: float | None) -> float:
    """How far a value goes toward its threshold: 0 = nowhere, 1 = at it, 2 = far beyond.

    For ``>=`` with a positive threshold this is value/threshold. For ``<=`` it is
    the linear mirror 2 - value/threshold (a drawdown twice the limit scores 0 and
    a zero drawdown 2), which, unlike threshold/value, is defined at value 0. A
    zero threshold uses a unit scale so the ratio never divides by zero. Missing
    values attain nothing.
    """
    if value is None or not math.isfinite(value):
        return 0.0
    scale = abs(c.threshold) if abs(c.threshold) > 1e-12 else 1.0
    sign = 1.0 if c.op in (">=", ">") else -1.0
    a = 1.0 + sign * (value - c.threshold) / scale
    return float(min(max(a, 0.0), ATTAINMENT_MAX))
