"""A throwaway Redis Cluster for the tests: three masters on free loopback ports.

`LocalCluster.start()` runs three `redis-server --cluster-enabled yes` processes (no
persistence, their config files in a temporary directory), joins them with
`redis-cli --cluster create … --cluster-replicas 0`, and waits until every node reports
`cluster_state:ok`. `stop()` ends exactly those processes, by PID. The machine's shared
Redis (port 6379) is never touched: the ports are picked free, and 6379 is refused.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.helpers.support import free_port

SHARED_PORT = 6379
BUS_OFFSET = 10_000  # a cluster node also listens on port + 10000 (the cluster bus)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, taken: set[int] | None = None) -> list[int]:
    """`n` loopback ports that are free, and whose cluster bus ports are free too."""
    taken = set(taken or ())
    ports: list[int] = []
    for _ in range(200):
        port = free_port()
        if (
            port + BUS_OFFSET < 65_536
            and SHARED_PORT not in (port, port + BUS_OFFSET)
            and port not in taken
            and port + BUS_OFFSET not in taken
            and _free(port + BUS_OFFSET)
        ):
            ports.append(port)
            taken |= {port, port + BUS_OFFSET}
            if len(ports) == n:
                return ports
    raise RuntimeError("no free loopback ports for a test cluster")


def available() -> str | None:
    """Why a local cluster cannot be started here (None: it can)."""
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


class LocalCluster:
    def __init__(self, workdir: Path, masters: int = 3) -> None:
        self.workdir = workdir
        self.masters = masters
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        self.ports = free_ports(self.masters)
        try:
            for port in self.ports:
                self._spawn(port)
            for port in self.ports:
                self._wait(port, deadline, lambda c: bool(c.ping()))
            hosts = [f"127.0.0.1:{port}" for port in self.ports]
            create = ["redis-cli", "--cluster", "create", *hosts]
            subprocess.run(
                [*create, "--cluster-replicas", "0", "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=max(1.0, deadline - time.monotonic()),
            )
            for port in self.ports:
                self._wait(port, deadline, self._healthy)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, port: int) -> None:
        log = (self.workdir / f"redis-{port}.log").open("wb")
        self.procs.append(
            subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(self.workdir / f"nodes-{port}.conf"),
                    "--cluster-node-timeout",
                    "5000",
                    "--dir",
                    str(self.workdir),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        log.close()

    def _healthy(self, client: redis.Redis) -> bool:
        info = client.cluster("INFO")  # redis-py parses the reply into a dict
        fields = {str(k): str(v) for k, v in dict(info).items()}
        return (
            fields.get("cluster_state") == "ok"
            and fields.get("cluster_slots_ok") == "16384"
            and fields.get("cluster_known_nodes") == str(self.masters)
        )

    def _wait(self, port: int, deadline: float, check: Callable[[redis.Redis], bool]) -> None:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        try:
            while True:
                with contextlib.suppress(redis.RedisError):
                    if check(client):
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"test cluster node {port} not ready")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """End the nodes this object started (by PID), and nothing else."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()
