"""The decision pipeline: analysts -> bull/bear debate -> research manager -> trader ->
risk team -> risk judge -> deterministic risk engine, and the reviewer.

Entry point: ``python -m swarm.analyze``; library: :func:`swarm.analyze.pipeline.decide`.
"""
