"""User quality criteria: parsing ``"sharpe>=1.0,max_drawdown_pct<=20"``, measuring attainment."""

from __future__ import annotations

import math
import re
import types
import typing

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


def parse_criteria(text: str | None) -> Criteria:
    """Parse comma-separated ``metric OP number`` items; ``None``/blank -> the defaults."""
    if text is None or not text.strip():
        text = DEFAULT_CRITERIA_TEXT
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
    if not rules:
        raise CriteriaError(f"no metric rule in {text!r}: add at least one, e.g. 'sharpe>=1.0'")
    return Criteria(rules=rules, **extra)


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
