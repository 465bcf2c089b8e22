"""Render a StrategySpec into a complete, standalone Backtrader module.

The output imports only ``backtrader`` and ``math``, uses only built-in ``bt.indicators``, holds
exactly one ``bt.Strategy`` subclass and reads lines only at ``[0]`` / ``[-k]``: it runs with
plain backtrader anywhere and passes ``strategies.validate.validate_code``.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import textwrap

from strategies.blocks import (
    ENTRIES,
    EXITS,
    FILTERS,
    SHARED_INDICATORS,
    SIZINGS,
    filter_init,
    required_params,
    unknown_blocks,
)
from strategies.family_api import whole_universe
from strategies.regime import INLINE_PARAMS, regime_symbol
from strategies.spec import StrategySpec, StrategyVariant

_I1 = "    "
_I2 = _I1 * 2
_I3 = _I1 * 3
_I4 = _I1 * 4


def class_name(name: str) -> str:
    """CamelCase identifier from a free-text name: "momentum-roc | tune x" -> "MomentumRocTuneX"."""
    words = [w for w in re.split(r"[^0-9A-Za-z]+", name) if w]
    camel = "".join(w[0].upper() + w[1:] for w in words)[:80]
    if not camel:
        return "GeneratedStrategy"
    if camel[0].isdigit():
        camel = "S" + camel
    if keyword.iskeyword(camel):  # "None", "True", "False"
        camel += "Strategy"
    return camel


def _safe_text(text: str) -> str:
    # Spec text may come from an LLM: keep it inert inside a docstring (no quotes, no escapes).
    cleaned = "".join(ch if ch.isprintable() else " " for ch in text)
    return cleaned.replace("\\", "/").replace('"', "'").strip()


def _literal(value: float | int | bool) -> str:
    if isinstance(value, bool | int):
        return repr(value)
    return repr(float(value))


def _check(spec: StrategySpec) -> None:
    problems = unknown_blocks(spec.entry, spec.filters, spec.exits, spec.sizing)
    if problems:
        raise ValueError("; ".join(problems))
    needed = required_params(spec.entry, spec.filters, spec.exits, spec.sizing)
    missing = [p for p in needed if p not in spec.parameters]
    if missing:
        raise ValueError(f"spec {spec.name!r} lacks parameters {missing} (see families.reconcile)")
    for p in spec.parameters:
        if not p.isidentifier() or keyword.iskeyword(p) or p.startswith("_"):
            raise ValueError(f"parameter name {p!r} is not a plain identifier")


def is_short_enabled(spec: StrategySpec) -> bool:
    """Shorts only when asked for and the entry idea has a mirror (not for mean reversion)."""
    return spec.long_short and ENTRIES[spec.entry].shortable


def _needs(spec: StrategySpec) -> set[str]:
    needs: set[str] = set(ENTRIES[spec.entry].needs)
    for f in spec.filters:
        needs |= FILTERS[f].needs
    for x in spec.exits:
        needs |= EXITS[x].needs
    needs |= SIZINGS[spec.sizing].needs
    if spec.sizing == "fixed_risk" and not {"atr_stop", "stop_loss", "trailing_stop"} & set(
        spec.exits
    ):
        needs.add("atr")  # fixed_risk falls back to a 2 x ATR stop distance
    return needs


def _docstring(spec: StrategySpec, short: bool) -> list[str]:
    side = "long and short" if short else "long only"
    lines = [
        f'{_I1}"""{_safe_text(spec.name)}',
        "",
        f"{_I1}Family: {spec.family.value} ({side}).",
        *textwrap.wrap(
            f"Approach: {_safe_text(spec.approach)}",
            width=96,
            initial_indent=_I1,
            subsequent_indent=_I1,
        ),
        f"{_I1}Blocks: entry={spec.entry}; filters={', '.join(spec.filters) or 'none'};",
        f"{_I1}exits={', '.join(spec.exits) or 'none'}; sizing={spec.sizing}.",
        f"{_I1}Orders are market orders: a signal on a bar's close fills at the next bar's open.",
        f'{_I1}"""',
    ]
    return [ln.rstrip() for ln in lines]


def _params(spec: StrategySpec, bars_per_year: int) -> list[str]:
    out = [f"{_I1}params = ("]
    for name, value in spec.parameters.items():
        if name in INLINE_PARAMS:  # written into the code as the feed name (blocks.filter_init)
            out.append(f"{_I2}# {name}={_literal(value)}: reads {regime_symbol(value)}")
            continue
        out.append(f'{_I2}("{name}", {_literal(value)}),')
    if spec.sizing == "volatility_target":
        # A property of the data, not a trial parameter: never tuned, not in the trial key.
        out.append(f'{_I2}("bars_per_year", {int(bars_per_year)}),  # annualises realised vol')
    out.append(f"{_I1})")
    return out


def _init(spec: StrategySpec) -> list[str]:
    out = [
        f"{_I1}def __init__(self):",
        f"{_I2}# One pending order at a time; entry facts are recorded when the order fills.",
        f"{_I2}self.order = None",
        f"{_I2}self.entry_price = None",
        f"{_I2}self.entry_bar = None",
    ]
    if "trailing_stop" in spec.exits:
        out.append(f"{_I2}self.extreme_close = None  # best close since entry (trailing stop)")
    if "atr_stop" in spec.exits:
        out.append(f"{_I2}self.stop_level = None  # ATR stop, fixed at the fill")
    needs = _needs(spec)
    for name in sorted(needs):
        out.append(f"{_I2}self.{name} = {SHARED_INDICATORS[name]}")
    out.append(f"{_I2}# entry: {spec.entry}")
    out += [f"{_I2}{ln}" for ln in ENTRIES[spec.entry].init]
    for f in spec.filters:
        if FILTERS[f].init:
            out.append(f"{_I2}# filter: {f}")
            out += [f"{_I2}{ln}" for ln in filter_init(f, spec.parameters)]
    sizing = SIZINGS[spec.sizing]
    if sizing.init:
        out.append(f"{_I2}# sizing: {spec.sizing}")
        out += [f"{_I2}{ln}" for ln in sizing.init]
    return out


def _notify_order(spec: StrategySpec) -> list[str]:
    out = [
        f"{_I1}def notify_order(self, order):",
        f"{_I2}if order.status in (order.Submitted, order.Accepted, order.Partial):",
        f"{_I3}return  # still working: it stays the pending order",
        f"{_I2}if order.status == order.Completed:",
        f"{_I3}if self.position.size != 0:",
        f"{_I4}# An opening fill (we never scale in): remember where and when we got in.",
        f"{_I4}self.entry_price = order.executed.price",
        f"{_I4}self.entry_bar = len(self)",
    ]
    if "trailing_stop" in spec.exits:
        out.append(f"{_I4}self.extreme_close = order.executed.price")
    if "atr_stop" in spec.exits:
        distance = "self.p.atr_stop_mult * self.atr[0]"
        out += [
            f"{_I4}if self.position.size > 0:",
            f"{_I4}{_I1}self.stop_level = order.executed.price - {distance}",
            f"{_I4}else:",
            f"{_I4}{_I1}self.stop_level = order.executed.price + {distance}",
        ]
    out += [
        f"{_I3}else:",
        f"{_I4}self.entry_price = None",
        f"{_I4}self.entry_bar = None",
        f"{_I2}# Completed, canceled, margin or rejected: the slot is free again.",
        f"{_I2}self.order = None",
    ]
    return out


def _ready(spec: StrategySpec) -> list[str]:
    checks = ["self.data.close[0]"]
    needs = _needs(spec)
    checks += [f"self.{n}[0]" for n in sorted(needs)]
    checks += list(ENTRIES[spec.entry].nan_checks)
    for f in spec.filters:
        checks += list(FILTERS[f].nan_checks)
    checks += list(SIZINGS[spec.sizing].nan_checks)
    checks = list(dict.fromkeys(checks))
    out = [
        f"{_I1}def _ready(self) -> bool:",
        f"{_I2}# next() starts after the indicators' warm-up; still never trade on a NaN.",
        f"{_I2}values = (",
    ]
    out += [f"{_I3}{c}," for c in checks]
    out += [
        f"{_I2})",
        f"{_I2}return not any(math.isnan(v) for v in values)",
    ]
    return out


def _signal(spec: StrategySpec, side: str) -> list[str]:
    entry = ENTRIES[spec.entry]
    cond = entry.long_entry if side == "long" else entry.short_entry
    why = entry.why if side == "long" else "the mirror image of the long entry"
    out = [
        f"{_I1}def _{side}_signal(self) -> bool:",
        f"{_I2}# entry {spec.entry}: {why}",
        f"{_I2}if not ({cond}):",
        f"{_I3}return False",
    ]
    for f in spec.filters:
        block = FILTERS[f]
        ok = block.long_ok if side == "long" else block.short_ok
        out += [
            f"{_I2}# filter {f}: {block.why}",
            f"{_I2}if not ({ok}):",
            f"{_I3}return False",
        ]
    out.append(f"{_I2}return True")
    return out


def _exit(spec: StrategySpec, side: str) -> list[str]:
    out = [
        f"{_I1}def _exit_{side}(self) -> bool:",
        f"{_I2}if self.entry_price is None:",
        f"{_I3}return False",
    ]
    conds = [EXITS[x].long_exit or "" for x in spec.exits]
    if any(c.startswith("close ") for c in conds):
        out.append(f"{_I2}close = self.data.close[0]")
    if not spec.exits:
        out.append(f"{_I2}# no exit block: the position is held to the end")
    for x in spec.exits:
        block = EXITS[x]
        if x == "opposite_signal":
            entry = ENTRIES[spec.entry]
            cond = entry.long_exit if side == "long" else entry.short_exit
            why = f"the exit of {spec.entry}"
        else:
            cond = block.long_exit if side == "long" else block.short_exit
            why = block.why
        out += [
            f"{_I2}# {x}: {why}",
            f"{_I2}if {cond}:",
            f"{_I3}return True",
        ]
    out.append(f"{_I2}return False")
    return out


def _stop_distance(spec: StrategySpec) -> str:
    # fixed_risk needs a per-share risk: the tightest declared stop, else 2 x ATR.
    if "atr_stop" in spec.exits:
        return "self.p.atr_stop_mult * self.atr[0]"
    if "stop_loss" in spec.exits:
        return "close * self.p.stop_loss_pct"
    if "trailing_stop" in spec.exits:
        return "close * self.p.trail_pct"
    return "2.0 * self.atr[0]"


def _size(spec: StrategySpec) -> list[str]:
    out = [
        f"{_I1}def _size(self) -> int:",
        f"{_I2}# sizing {spec.sizing}: {SIZINGS[spec.sizing].why}",
        f"{_I2}close = self.data.close[0]",
        f"{_I2}if close <= 0.0:",
        f"{_I3}return 0",
        f"{_I2}value = self.broker.getvalue()",
        f"{_I2}cap = math.floor(value * self.p.position_fraction / close)",
    ]
    if spec.sizing == "fixed_fraction":
        out.append(f"{_I2}return max(0, cap)")
    elif spec.sizing == "fixed_risk":
        out += [
            f"{_I2}stop_distance = {_stop_distance(spec)}",
            f"{_I2}if stop_distance <= 0.0:",
            f"{_I3}return 0",
            f"{_I2}quantity = math.floor(value * self.p.risk_pct / stop_distance)",
            f"{_I2}return max(0, min(quantity, cap))",
        ]
    else:  # volatility_target
        out += [
            f"{_I2}realised_vol = self.realised_sd[0] * math.sqrt(self.p.bars_per_year)",
            f"{_I2}if realised_vol <= 0.0:",
            f"{_I3}return 0",
            f"{_I2}fraction = min(self.p.position_fraction, self.p.target_vol / realised_vol)",
            f"{_I2}return max(0, math.floor(value * fraction / close))",
        ]
    return out


def _next(spec: StrategySpec, short: bool) -> list[str]:
    trailing = "trailing_stop" in spec.exits
    out = [
        f"{_I1}def next(self):",
        f"{_I2}if self.order is not None:",
        f"{_I3}return  # wait for the pending order",
        f"{_I2}if not self._ready():",
        f"{_I3}return",
        f"{_I2}if self.position.size > 0:",
    ]
    if trailing:
        out.append(f"{_I3}self.extreme_close = max(self.extreme_close, self.data.close[0])")
    out += [
        f"{_I3}if self._exit_long():",
        f"{_I4}self.order = self.close()",
        f"{_I3}return",
    ]
    if short:
        out.append(f"{_I2}if self.position.size < 0:")
        if trailing:
            out.append(f"{_I3}self.extreme_close = min(self.extreme_close, self.data.close[0])")
        out += [
            f"{_I3}if self._exit_short():",
            f"{_I4}self.order = self.close()",
            f"{_I3}return",
        ]
    out += [
        f"{_I2}if self._long_signal():",
        f"{_I3}size = self._size()",
        f"{_I3}if size > 0:",
        f"{_I4}self.order = self.buy(size=size)",
    ]
    if short:
        out += [
            f"{_I2}elif self._short_signal():",
            f"{_I3}size = self._size()",
            f"{_I3}if size > 0:",
            f"{_I4}self.order = self.sell(size=size)",
        ]
    return out


def render(spec: StrategySpec, *, bars_per_year: int = 252) -> str:
    """The complete module source for ``spec``; raises ValueError on unknown blocks/params.

    ``bars_per_year`` (the data's bars a year: 252 for exchange days, 365 for 24/7
    markets, more for intraday) annualises the volatility-target sizing.
    """
    if bars_per_year < 1:
        raise ValueError(f"bars_per_year must be >= 1, got {bars_per_year}")
    if whole_universe(spec):
        from strategies.portfolio_code import render_portfolio

        return render_portfolio(spec, bars_per_year=bars_per_year, class_name=class_name(spec.name))
    _check(spec)
    short = is_short_enabled(spec)
    sections: list[list[str]] = [
        _params(spec, bars_per_year),
        _init(spec),
        _notify_order(spec),
        _ready(spec),
        _signal(spec, "long"),
    ]
    if short:
        sections.append(_signal(spec, "short"))
    sections.append(_exit(spec, "long"))
    if short:
        sections.append(_exit(spec, "short"))
    sections += [_size(spec), _next(spec, short)]

    lines = [
        f'"""Generated Backtrader strategy: {_safe_text(spec.name)} (trial {spec.trial_key()})."""',
        "",
        "import math",
        "",
        "import backtrader as bt",
        "",
        "",
        f"class {class_name(spec.name)}(bt.Strategy):",
        *_docstring(spec, short),
    ]
    for section in sections:
        lines.append("")
        lines += section
    return "\n".join(lines) + "\n"


def code_sha256(code: str) -> str:
    """The SHA-256 hex digest of ``code`` (UTF-8)."""
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def make_variant(
    spec: StrategySpec,
    *,
    variant_id: str,
    parent_id: str | None,
    iteration: int,
    route: str,
    bars_per_year: int = 252,
) -> StrategyVariant:
    """Render ``spec`` and wrap it with its lineage and the sha256 of the exact code."""
    code = render(spec, bars_per_year=bars_per_year)
    return StrategyVariant(
        variant_id=variant_id,
        parent_id=parent_id,
        iteration=iteration,
        route=route,
        spec=spec,
        code=code,
        code_sha256=code_sha256(code),
    )
