"""The one exception root of ``altdata``: every error a caller can act on says what to do."""

from __future__ import annotations


class AltDataError(Exception):
    """A source could not give its data; the message names the fix (a setting, a flag, a wait)."""


class SourceOffline(AltDataError):
    """The data is not cached and the run may not use the network."""
