"""The gate's calibration (``python -m swarm.calibrate``), one role a module.

- ``synthetic_universe``: the seeded synthetic universes (null, planted) a scenario runs on;
- ``scenarios``: the named universes (null and planted), their seeds, ``--kinds`` parsing;
- ``jobs``: the runs one invocation asks for (``RunSpec``s), checked before any folder is made;
- ``runner``: one run (universe, develop loop, verdict record) and running them all;
- ``stats``: binomial intervals (Wilson, Clopper-Pearson) and the per-scenario rates;
- ``report``: the per-run line, the summary lines against the targets, ``calibration.json``.

The CLI (argument parser and ``main``) is ``swarm.calibrate``.
"""
