"""``python -m backtest.screen SPEC.json ...``: the screen's command line
(``backtest.screen.screening.main``)."""

from backtest.screen.screening import main

if __name__ == "__main__":
    raise SystemExit(main())
