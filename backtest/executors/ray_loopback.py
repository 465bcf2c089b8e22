"""Ray kept on the loopback interface: every listener and every connection on 127.0.0.1.

Ray binds each server to its node's IP address, but it replaces a loopback address
(``127.0.0.1``, ``localhost``) by the machine's outward one wherever it meets it
(``ray._private.services.resolve_ip_for_localhost``, called on ``--node-ip-address``, on
``ray.init(_node_ip_address=...)`` and on the address a node or a driver joins). On a machine
where only loopback traffic is allowed, a cluster of local nodes, or the local instance of
``--executor ray``, then listens on an address nothing may reach. ``loopback_kept`` keeps a
loopback address as given for the duration of a Ray call; ``python -m
backtest.executors.ray_loopback start|stop ...`` is ``ray start|stop`` with it in force (a node
of a loopback cluster):

    RAY_AUTH_MODE=token RAY_AUTH_TOKEN=... python -m backtest.executors.ray_loopback start \\
        --head --node-ip-address 127.0.0.1 --port 6390 --num-cpus 4
    RAY_AUTH_MODE=token RAY_AUTH_TOKEN=... python -m backtest.executors.ray_loopback start \\
        --address 127.0.0.1:6390 --node-ip-address 127.0.0.1 --num-cpus 4

Ray 2.x clusters authenticate with a token (Ray's token-auth documentation): the same
``RAY_AUTH_TOKEN`` (or ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``) for the head, every
node and the driver (``--executor ray --ray-address 127.0.0.1:6390``).

A non-loopback address is left to Ray as it is: this changes nothing for a real cluster.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

LOOPBACK = "127.0.0.1"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def host_of(address: str) -> str:
    """The host part of a Ray address (``host:port``, ``ray://host:port``, ``[::1]:port``)."""
    rest = address.split("://", 1)[-1]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if ":" in rest else rest


def is_loopback(address: str | None) -> bool:
    """Whether Ray should stay on loopback for ``address`` (None: a local instance)."""
    return address is None or host_of(address) in _LOOPBACK_HOSTS


@contextlib.contextmanager
def loopback_kept() -> Iterator[None]:
    """Within the block, Ray keeps a loopback address instead of swapping in the outward one."""
    import ray._private.services as services

    original = services.resolve_ip_for_localhost
    services.resolve_ip_for_localhost = _as_given
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = original


def _as_given(host: str) -> str:
    if not host:
        raise ValueError(f"Malformed host: {host!r}")
    return host


def main(argv: list[str] | None = None) -> int:
    """``ray start|stop|status ...`` with loopback addresses kept (a node of a local cluster)."""
    from ray.scripts.scripts import cli

    with loopback_kept():
        try:
            cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="ray")
        except SystemExit as done:
            return int(done.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
