"""``mask_scan.prompt_leaks``, the same answer, without its cost: a prompt is scanned for only
the company and GICS names whose text it contains.

``leaks_in`` searches every one of ~1,000 names in every prompt with its own regex, and the
``re`` module's cache (512 patterns) cannot hold them: a masked develop run's ~350 prompts
compiled ~320,000 regexes (~80 % of the test's time). Every name's regex matches its literal
text (with word boundaries around it), so a name whose text is not in the prompt cannot match:

* a name of one word is matched case as written: its text must be in the prompt;
* a GICS name is matched in the lowered prompt: its lowered text must be in it;
* a name of several words is matched in any case (``re.IGNORECASE``): its lowered text must
  be in the prompt folded the way the regex folds it (each character to its lower case; a
  non-ASCII one that matches an ASCII letter, such as the Kelvin sign, to that letter).

The names left are handed to ``mask_scan.leaks_in`` itself: the same regexes decide."""

from __future__ import annotations

import functools
import re
import string

from mask_scan import leaks_in


@functools.cache
def _folded(ch: str) -> str | None:
    """``ch`` as a case-insensitive regex sees it against ASCII letters: the one ASCII letter
    it matches (lower case), or itself; None when it matches several (then keep every name)."""
    if ch.isascii():
        return ch.lower()
    twins = {x for x in string.ascii_lowercase if re.fullmatch(x, ch, re.IGNORECASE)}
    if len(twins) > 1:
        return None
    return twins.pop() if twins else ch


def _candidates(prompt: str, names: set[str], gics: set[str]) -> tuple[set[str], set[str]]:
    low = prompt.lower()
    chars = [_folded(c) for c in prompt]
    folded = None if None in chars else "".join(chars)

    def may_match(name: str) -> bool:
        if " " not in name:
            return name in prompt
        if folded is not None and name.isascii():
            return name.lower() in folded
        return True

    return {n for n in names if may_match(n)}, {g for g in gics if g.lower() in low}


def prompt_leaks(prompts, scan) -> dict[str, list[str]]:
    """Tool -> what its prompts named, over ``(tool, prompt)`` pairs; empty when clean (the
    same as ``mask_scan.prompt_leaks``)."""
    tickers, names, gics = scan
    bad: dict[str, set[str]] = {}
    for tool, prompt in prompts:
        found = leaks_in(prompt, tickers, *_candidates(prompt, names, gics))
        if found:
            bad.setdefault(tool, set()).update(found)
    return {t: sorted(f)[:20] for t, f in bad.items()}
