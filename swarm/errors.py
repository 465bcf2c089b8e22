"""Errors of the orchestration layer. ``UserInputError`` maps to exit code 2."""


class SwarmError(Exception):
    """Root of the swarm package's errors."""


class UserInputError(SwarmError):
    """Bad input from the user. The message is one line: the argument, the problem, the fix."""
