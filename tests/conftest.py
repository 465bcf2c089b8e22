"""Shared fixtures: the real market-data corpus in ../shared/data (never copied here)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO_ROOT.parent / "shared" / "data").resolve()
DAILY_DIR = SHARED_DATA / "ohlcv" / "daily"


def read_real_bars(symbol: str, start: str, end: str) -> pd.DataFrame:
    """Real daily bars from the corpus, as the engine expects them (float64 OHLCV)."""
    path = DAILY_DIR / f"{symbol}.csv"
    if not path.exists():
        pytest.skip(f"real corpus not found at {path}")
    df = pd.read_csv(path, parse_dates=["date"]).set_index("date")
    df = df.loc[start:end, ["open", "high", "low", "close", "volume"]].astype("float64")
    df.index.name = "date"
    return df


@pytest.fixture(scope="session")
def daily_dir() -> Path:
    if not DAILY_DIR.exists():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    return DAILY_DIR


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _isolated_memory(monkeypatch, tmp_path):
    """Tests never read or write the user's research memory under ~/.cache."""
    monkeypatch.setattr("swarm.memory.store.default_memory_dir", lambda: tmp_path / "memory")
