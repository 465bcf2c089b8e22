"""The LLM options ``swarm.develop`` and ``swarm.analyze`` share: one set of flags, each
command's own help text (what its quick and deep models do, where its cache goes)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from swarm.llm.settings import CONCURRENCY_HELP


@dataclass(frozen=True)
class LLMHelp:
    """The help line of each LLM option, as one command words it."""

    llm: str
    base_url: str
    quick: str
    deep: str
    structured: str
    budget: str
    output: str
    cache: str
    mask: str
    cutoff: str


def add_llm_arguments(p: argparse.ArgumentParser, words: LLMHelp) -> None:
    """The LLM brains: provider, server, models, output method, budget, concurrency, replay
    cache, masking and the model's cutoff (``swarm.llm.settings`` reads them)."""
    p.add_argument("--llm", default="none", help=words.llm)
    p.add_argument("--llm-base-url", default=None, help=words.base_url)
    p.add_argument("--llm-quick-model", default=None, help=words.quick)
    p.add_argument("--llm-deep-model", default=None, help=words.deep)
    p.add_argument("--llm-structured", default="auto", help=words.structured)
    p.add_argument("--max-llm-tokens", type=int, default=None, help=words.budget)
    p.add_argument("--llm-max-output-tokens", type=int, default=512, help=words.output)
    p.add_argument("--llm-concurrency", type=int, default=None, help=CONCURRENCY_HELP)
    p.add_argument("--llm-cache", type=Path, default=None, help=words.cache)
    p.add_argument("--mask", action=argparse.BooleanOptionalAction, default=None, help=words.mask)
    p.add_argument("--llm-cutoff", default=None, metavar="DATE", help=words.cutoff)
