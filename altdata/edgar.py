"""A client for SEC EDGAR company facts (``data.sec.gov``), as point-in-time statements.

What SEC asks of automated clients, and how this client meets it:

* a declared ``User-Agent`` naming the requester and a contact email: required
  (``EdgarSettings.user_agent``, from ``SEC_EDGAR_USER_AGENT``); without it SEC answers 403, so
  the client refuses to start instead (``UserAgentMissing``);
* at most 10 requests per second: requests are spaced by ``1 / max_requests_per_second``
  (default 8/s, below the limit when another tool shares the address);
* throttling (429) and server errors (5xx) are retried with exponential backoff, honouring
  ``Retry-After``; a 404 is a typed ``NotFound`` (no company facts for that CIK).

Responses are cached on disk (``<cache_dir>/edgar/``); a cached file younger than
``max_age_hours`` is used without a request, and offline any cached file is used (a miss is
``SourceOffline``). The conversion to statements is ``altdata.edgar_facts``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from altdata.edgar_facts import statements_from_companyfacts
from altdata.errors import AltDataError, SourceOffline

TICKERS_URL = "https://www.sec.gov/files/company_tickers.json"
FACTS_URL = "https://data.sec.gov/api/xbrl/companyfacts/CIK{cik:010d}.json"
USER_AGENT_ENV = "SEC_EDGAR_USER_AGENT"
SEC_MAX_RPS = 10.0  # SEC's fair-access limit
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
SOURCE = "sec-edgar companyfacts"
RULE = "the filing date's NYSE close + 30 min (EDGAR gives the date, not the time)"


class EdgarError(AltDataError):
    """An EDGAR request failed; the message says what to do."""


class UserAgentMissing(EdgarError):
    pass


class NotFound(EdgarError):
    pass


def default_cache_dir() -> Path:
    """Where downloads are cached: the user cache folder (``~/.cache`` without platformdirs)."""
    try:
        import platformdirs
    except ImportError:  # the usual place
        return Path.home() / ".cache" / "swarm-lab"
    return Path(platformdirs.user_cache_dir("swarm-lab"))


class EdgarSettings(BaseModel):
    """How to reach EDGAR. ``user_agent``: "Name email@domain" (SEC's fair-access policy)."""

    model_config = ConfigDict(frozen=True)
    user_agent: str = ""
    cache_dir: Path = Field(default_factory=default_cache_dir)
    offline: bool = False
    max_requests_per_second: float = Field(default=8.0, gt=0, le=SEC_MAX_RPS)
    retries: int = Field(default=4, ge=0)
    backoff_seconds: float = Field(default=1.0, ge=0)
    timeout_seconds: float = Field(default=30.0, gt=0)
    max_age_hours: float = Field(default=24.0, ge=0)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kw: object) -> EdgarSettings:
        """Settings whose User-Agent comes from ``env`` (the process environment by default)."""
        env = os.environ if env is None else env
        return cls(user_agent=env.get(USER_AGENT_ENV, ""), **kw)  # type: ignore[arg-type]

    def check_user_agent(self) -> None:
        """Raise ``UserAgentMissing`` unless the User-Agent has a name and an email (SEC rule)."""
        ua = self.user_agent.strip()
        if not ua or "@" not in ua:
            raise UserAgentMissing(
                f"SEC EDGAR requires a User-Agent naming you and a contact email; set "
                f"{USER_AGENT_ENV}='Jane Doe jane@example.com' (got {ua!r}), or run --offline "
                "to read only what is cached"
            )


class RateLimiter:
    """Spaces request starts by ``1 / rate`` seconds, across threads."""

    def __init__(self, rate: float, *, clock: Callable[[], float], sleep: Callable[[float], None]):
        self._interval, self._clock, self._sleep = 1.0 / rate, clock, sleep
        self._next = float("-inf")
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Block until the next request may go out, keeping to the rate limit across threads."""
        with self._lock:
            now = self._clock()
            if now < self._next:
                self._sleep(self._next - now)
                now = self._next
            self._next = now + self._interval


class EdgarClient:
    """Company facts and the ticker -> CIK map, cached, rate limited and retried.

    ``transport``/``sleep``/``clock`` are injection points for tests (``httpx.MockTransport``,
    no real waiting)."""

    def __init__(
        self,
        settings: EdgarSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not settings.offline:
            settings.check_user_agent()
        self.settings, self._sleep, self._clock = settings, sleep, clock
        self._limiter = RateLimiter(settings.max_requests_per_second, clock=clock, sleep=sleep)
        self._http = httpx.Client(
            transport=transport,
            timeout=settings.timeout_seconds,
            headers={"User-Agent": settings.user_agent.strip(), "Accept-Encoding": "gzip"},
        )
        self._cik: dict[str, int] | None = None

    @property
    def cache(self) -> Path:
        """The folder of this client's EDGAR downloads."""
        return self.settings.cache_dir / "edgar"

    def close(self) -> None:
        """Release the HTTP connections."""
        self._http.close()

    # ------------------------------------------------------------------ HTTP + cache

    def _get(self, url: str) -> bytes:
        s = self.settings
        for attempt in range(s.retries + 1):
            self._limiter.wait()
            try:
                r = self._http.get(url)
            except httpx.TransportError as exc:
                if attempt == s.retries:
                    raise EdgarError(
                        f"{url}: {type(exc).__name__} after {attempt + 1} tries; check the "
                        "network, or run --offline on what is cached"
                    ) from None
                self._sleep(s.backoff_seconds * 2**attempt)
                continue
            if r.status_code == 200:
                return r.content
            if r.status_code == 404:
                raise NotFound(f"{url}: not found at SEC (404)")
            if r.status_code == 403:
                raise EdgarError(
                    f"{url}: SEC refused the request (403); check {USER_AGENT_ENV} names you "
                    "and an email, and that you stay under 10 requests/s"
                )
            if r.status_code not in RETRY_STATUS or attempt == s.retries:
                raise EdgarError(
                    f"{url}: HTTP {r.status_code} after {attempt + 1} tries; try again later"
                )
            self._sleep(_retry_after(r) or s.backoff_seconds * 2**attempt)
        raise AssertionError("unreachable")

    def _cached_json(self, url: str, path: Path, what: str) -> object:
        s = self.settings
        if path.is_file():
            age_h = (time.time() - path.stat().st_mtime) / 3600
            if s.offline or age_h <= s.max_age_hours:
                try:
                    return json.loads(path.read_bytes())
                except ValueError:
                    pass  # a torn cache file: fetch again (online) or report the miss
        if s.offline:
            raise SourceOffline(
                f"offline and no cached EDGAR {what} ({path}); run once without --offline "
                f"(with {USER_AGENT_ENV} set) to cache it"
            )
        body = self._get(url)
        data = json.loads(body)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(body)
        tmp.replace(path)  # atomic: a reader never sees half a file
        return data

    # ------------------------------------------------------------------ API

    def cik(self, ticker: str) -> int:
        """The CIK of ``ticker`` (SEC spells share classes with a dash: BRK-B)."""
        if self._cik is None:
            data = self._cached_json(TICKERS_URL, self.cache / "company_tickers.json", "ticker map")
            self._cik = cik_map(data)
        key = ticker.strip().upper().replace(".", "-")
        if key not in self._cik:
            raise NotFound(f"{ticker}: not in SEC's ticker map (not an SEC registrant, or renamed)")
        return self._cik[key]

    def company_facts(self, ticker: str) -> dict:
        """The XBRL company facts of ``ticker`` (cached), as SEC serves them."""
        cik = self.cik(ticker)
        path = self.cache / "companyfacts" / f"CIK{cik:010d}.json"
        data = self._cached_json(FACTS_URL.format(cik=cik), path, f"company facts of {ticker}")
        if not isinstance(data, dict):
            raise EdgarError(f"{path}: not a companyfacts object; delete it and fetch again")
        return data

    def statements(self, ticker: str) -> pd.DataFrame:
        """The ticker's point-in-time statement versions (``altdata.statements`` columns)."""
        facts = self.company_facts(ticker)
        try:
            return statements_from_companyfacts(facts, ticker.upper())
        except ValueError as exc:  # a fact entry not in the companyfacts shape
            raise EdgarError(
                f"{ticker}: company facts not in the expected shape ({exc}); delete "
                f"{self.cache / 'companyfacts'} and fetch again"
            ) from None


class CompanyTicker(BaseModel):
    """One entry of ``company_tickers.json``: ``{"cik_str": 320193, "ticker": "AAPL", ...}``."""

    model_config = ConfigDict(extra="ignore")
    cik_str: int
    ticker: str


def cik_map(data: object) -> dict[str, int]:
    """Ticker -> CIK from ``company_tickers.json`` (an object of numbered entries)."""
    if not isinstance(data, dict):
        raise EdgarError("company_tickers.json: expected an object of entries; delete the cache")
    entries = [CompanyTicker.model_validate(v) for v in data.values()]
    return {e.ticker.upper(): e.cik_str for e in entries}


def _retry_after(r: httpx.Response) -> float | None:
    try:
        return max(0.0, float(r.headers.get("Retry-After", "")))
    except ValueError:
        return None  # an HTTP date, or absent: back off on our own schedule
