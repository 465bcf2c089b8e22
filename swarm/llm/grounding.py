"""Grounding checks for LLM output: every number it states must exist in its evidence.

An LLM finding may only cite values of the deterministic feature bundle. A number in
the text or the evidence that matches none of the allowed values (within rounding) is
an invented number, and the finding is rejected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:,\d{3})*(?:\.\d+)?%?")
# Small integers are parameters and counts ("RSI 14", "50-day", "3 of 5"): not claims.
_TRIVIAL_MAX = 400


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` (thousands separators and % dropped)."""
    out = []
    for token in _NUMBER.findall(text or ""):
        token = token.replace(",", "").rstrip("%")
        try:
            out.append(float(token))
        except ValueError:
            continue
    return out


def _matches(x: float, allowed: Iterable[float], rel_tol: float, abs_tol: float) -> bool:
    for a in allowed:
        for candidate in (a, a * 100.0, a / 100.0):  # the same figure as a fraction or a percent
            if math.isclose(x, candidate, rel_tol=rel_tol, abs_tol=abs_tol):
                return True
            # Rounded in the text: 61.234 cited as 61.2 or 61
            for digits in (0, 1, 2, 3, 4):
                if round(candidate, digits) == x:
                    return True
    return False


def ungrounded_numbers(
    text: str,
    evidence: Mapping[str, float],
    *,
    extra_allowed: Iterable[float] = (),
    rel_tol: float = 5e-3,
    abs_tol: float = 1e-9,
) -> list[float]:
    """Numbers in ``text`` that are neither trivial nor (rounded) values of ``evidence``."""
    allowed = [float(v) for v in evidence.values() if v is not None and math.isfinite(float(v))]
    allowed += [float(v) for v in extra_allowed]
    bad = []
    for x in numbers_in(text):
        if float(x).is_integer() and abs(x) <= _TRIVIAL_MAX:
            continue
        if not _matches(x, allowed, rel_tol, abs_tol):
            bad.append(x)
    return bad


def evidence_mismatches(
    cited: Mapping[str, float], bundle_values: Mapping[str, float], *, rel_tol: float = 1e-6
) -> list[str]:
    """Evidence keys the LLM cited that are unknown or whose value differs from the bundle."""
    problems = []
    for key, value in cited.items():
        if key not in bundle_values:
            problems.append(f"{key}: not in the evidence given")
        elif not math.isclose(
            float(value), float(bundle_values[key]), rel_tol=rel_tol, abs_tol=1e-9
        ):
            problems.append(f"{key}: cited {value} but the data says {bundle_values[key]}")
    return problems
