"""The habits that keep the house in order, checked in CI: mypy on the trusted core and ruff
(the complexity rule included) on the whole tree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
TYPED = ("gate", "strategies", "backtest")


@pytest.mark.slow
def test_mypy_is_clean_on_the_trusted_core(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is in the dev extra: pip install -e '.[dev]'")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy"), *TYPED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is in the dev extra: pip install -e '.[dev]'")
    out = subprocess.run(
        [ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout[-4000:]


# The modules that may ask which kind a spec is: the registry, and each family's own code
# (its plugin in swarm/families/ and the strategy-floor module it renders and proposes with).
KIND_ASKERS = {
    "strategies/family_api.py": "the registry and whole_universe(), the one scope comparison",
    "strategies/families.py": "the block families' catalogue (the catch-all plugin's own code)",
    "strategies/portfolio.py": "the portfolio families' own code",
    "strategies/portfolio_code.py": "the portfolio families' rendering",
    "strategies/decision_family.py": "the decision pipeline's own code",
    "swarm/analyze/family.py": "the decision pipeline's plugin helpers",
}
KIND_PREDICATE = re.compile(
    r"is_portfolio_spec\(|is_decision_spec\(|[!=]= *[\"']portfolio[\"']|[\"']portfolio[\"'] *[!=]="
    r"|== *SCOPE\b|isinstance\([^)]*family[^)]*(Family|PortfolioFamily|PipelineFamily)\)"
    r"|[!=]= *PipelineFamily\."  # (a portfolio move or screen may tell rotation from momentum)
)


def test_only_the_registry_and_the_plugins_ask_a_specs_kind() -> None:
    """Issue 25: adding a family is one new plugin module, so no other module branches on a
    spec's kind or scope; they ask the registry (``FamilyRegistry``) or ``whole_universe``."""
    found = []
    for package in ("strategies", "swarm", "gate", "backtest", "experiments", "altdata"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in KIND_ASKERS or rel.startswith("swarm/families/"):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if KIND_PREDICATE.search(line.split("#", 1)[0]):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "ask the registry (strategies.family_api), not the kind:\n" + "\n".join(found)
