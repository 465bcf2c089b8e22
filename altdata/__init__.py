"""Point-in-time alternative data for research, analysts, strategies and the screen.

``altdata.pit`` holds the contract (a table whose every row carries the moment it became
known, cut by time); ``altdata.corpus`` reads a folder laid out like ``../shared/data/``
(``fundamentals/``, ``analyst/``, ``news/``, ``options/``, ``social/``) with each file's
availability rule; ``altdata.sessions`` is the exchange calendar those rules use.
``altdata.edgar`` (SEC company facts) and ``altdata.yf_fundamentals`` serve the statements
table from online sources (``altdata.statements``), with the same point-in-time contract.
"""
