"""Errors of the quality gate. One root so callers can catch everything the gate raises."""

from __future__ import annotations


class GateError(Exception):
    """Root of every error the gate raises on purpose."""


class CriteriaError(GateError, ValueError):
    """User criteria that cannot be parsed; the message says what to type instead."""
