"""``kind: address``: a running scheduler the sweep connects to (started with ``dask
scheduler`` and ``dask worker``, or by anything else); the sweep neither starts nor stops it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from distributed import Client, Security
from distributed.comm import connect as comm_connect

from pipeline.sweep.backends.base import Backend, SecurityConfig, first_worker
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.validation import choices, ranged

ANSWER_GRACE = 0.5
"""Seconds beyond ``cluster.timeout`` that something which accepted the connection at a
``cluster.address`` has to answer distributed's handshake: distributed gives up on an address
nothing accepts at the timeout itself, so a wait this much longer runs out only on a
listener that accepted and stays silent."""


@dataclass
class AddressClusterConfig:
    kind: str = choices("address", ["address"])
    """The cluster kind (``address``)."""
    address: str = choices("tcp://127.0.0.1:8786", "tcp://host:port or tls://host:port")
    """The scheduler's address (``tls://...`` with ``security.ca_file`` and ``cert``)."""
    timeout: float = ranged(5.0, least=0, above=True)
    """Seconds to wait for the scheduler's answer before giving up."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    """TLS with certificate files of the scheduler's authority (``SecurityConfig``)."""
    wait_for_workers: float = ranged(60.0, least=0, above=True)
    """Seconds the sweep waits while no worker is connected before it stops."""


async def _handshake(address: str, timeout: float, connection_args: dict) -> bool:
    """Whether what listens at ``address`` answers distributed's handshake within ``timeout``
    seconds (False: it accepted the connection and stayed silent); OSError where nothing
    accepts the connection."""
    try:
        comm = await asyncio.wait_for(
            comm_connect(address, timeout=timeout, **connection_args), timeout + ANSWER_GRACE
        )
    except TimeoutError:
        return False
    await comm.close()
    return True


def _answers(address: str, timeout: float, security: Security | None) -> bool:
    """``_handshake`` on an event loop of its own, in a thread (the caller's loop may be
    running, as in a notebook). ``Client`` cannot tell: it waits for the handshake forever."""
    connection_args = security.get_connection_args("client") if security else {}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _handshake(address, timeout, connection_args)).result()


class Address(Backend):
    kind = "address"
    schema = AddressClusterConfig
    starts_scheduler = False

    def validate(self, entry, tls: bool) -> None:
        scheme, found, _ = entry.address.partition("://")
        if not found:
            raise ConfigError(
                "cluster.address",
                f"{entry.address!r} is not a scheduler address; allowed: "
                "protocol://host:port, e.g. tcp://127.0.0.1:8786",
            )
        if (scheme == "tls") != tls:
            raise ConfigError(
                "cluster.address",
                f"{entry.address} needs cluster.security.ca_file and cert"
                if tls is False
                else f"{entry.address} is unencrypted; with cluster.security use tls://",
            )

    @contextlib.contextmanager
    def client(self, entry, security: Security | None, log_file=None) -> Iterator[Client]:
        """A client of the scheduler at ``entry.address``, with at least one worker; its answer
        within ``entry.timeout`` seconds, or ``ConfigError`` (one line) saying what was found."""
        try:
            if not _answers(entry.address, entry.timeout, security):
                raise ConfigError(
                    "cluster.address",
                    f"{entry.address} accepted a connection but did not answer as a Dask "
                    f"scheduler within {entry.timeout:g} s; allowed: a Dask scheduler's "
                    "address (`dask scheduler` prints it)",
                )
            client = Client(entry.address, timeout=entry.timeout, security=security)
        except (OSError, TimeoutError) as error:
            raise ConfigError(
                "cluster.address",
                f"no Dask scheduler answered at {entry.address} within {entry.timeout:g} s "
                f"({type(error).__name__}); start one with `dask scheduler` or fix the "
                "address" + (" or cluster.security" if security else ""),
            ) from None
        with client:
            first_worker(client, entry)
            yield client
