"""Write the Backtrader code of a spec: ``python -m strategies.render SPEC.json --out FILE.py``.

SPEC.json is the ``spec`` object of a run's ``variants.json`` (a whole entry, ``{"spec": ...}``,
is accepted too). The code is ``strategies.codegen.render``'s, so ``python -m backtest.run FILE.py
...`` judges exactly what the screen (``python -m backtest.screen SPEC.json ...``) evaluated. Bad
input exits 2 with one line naming the argument.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

from pydantic import ValidationError

from backtest.cli_args import OneLineParser, refuse
from strategies.codegen import render
from strategies.families import OWN_PARAMETERS
from strategies.family_api import whole_universe
from strategies.spec import StrategySpec


def _bad(argument: str, message: str) -> NoReturn:
    refuse("strategies.render", argument, message)


def read_spec(path: Path) -> StrategySpec:
    """The spec in ``path``; raises ValueError with a one-line reason."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {' '.join(str(exc).split())}") from None
    if isinstance(payload, dict) and isinstance(payload.get("spec"), dict):
        payload = payload["spec"]  # a whole variants.json entry
    try:
        return StrategySpec.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "spec"
        raise ValueError(f"not a StrategySpec ({where}: {first['msg']})") from None


def render_spec(spec: StrategySpec, *, bars_per_year: int = 252) -> str:
    """The module source; ValueError when the spec alone does not determine its code."""
    if spec.is_custom:
        raise ValueError(
            "custom code is not rendered from its spec: take `code` from variants.json"
        )
    # A family without blocks that is not a portfolio's: its code embeds its decisions.
    if spec.family.value in OWN_PARAMETERS and not whole_universe(spec):
        raise ValueError(
            f"{spec.family.value} code embeds its decisions: take `code` from variants.json"
        )
    return render(spec, bars_per_year=bars_per_year)


def main(argv: list[str] | None = None) -> int:
    """Render a spec JSON to a strategy file and print its path; the exit code."""
    p = OneLineParser(prog="python -m strategies.render", description=__doc__.splitlines()[0])
    p.add_argument("spec", type=Path, help="a spec JSON (the `spec` object of variants.json)")
    p.add_argument("--out", type=Path, required=True, help="the .py file to write")
    p.add_argument("--bars-per-year", type=int, default=252, help="annualises vol-target sizing")
    args = p.parse_args(argv)
    if args.bars_per_year < 1:
        _bad("--bars-per-year", "must be a positive number of bars")
    try:
        spec = read_spec(args.spec)
    except ValueError as exc:
        _bad("SPEC", str(exc))
    try:
        code = render_spec(spec, bars_per_year=args.bars_per_year)
    except ValueError as exc:
        _bad("SPEC", " ".join(str(exc).split()))
    try:
        args.out.write_text(code, encoding="utf-8")
    except OSError as exc:
        _bad("--out", f"cannot write {args.out}: {exc}")
    print(str(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
