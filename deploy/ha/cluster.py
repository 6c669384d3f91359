#!/usr/bin/env python
"""A highly available PostgreSQL on the loopback address: etcd and two Patroni nodes.

The nodes run ``deploy/ha/patroni.yml`` (the shipped configuration) with only the names,
addresses, ports, paths and passwords changed, so what the failover test measures is what an
operator installs. Everything listens on 127.0.0.1 and lives in one temporary directory.

    python deploy/ha/cluster.py        # start a cluster, print its URLs, Ctrl-C stops it

Needs Debian's ``patroni`` and ``etcd-server`` packages and PostgreSQL's server binaries
(``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses to run as root: as root, the
nodes run as the ``postgres`` system user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SHIPPED_CONFIG = Path(__file__).with_name("patroni.yml")
SUPERUSER_PASSWORD = "ha-superuser"  # noqa: S105 (a throwaway loopback cluster)
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def postgres_bin_dir() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    if not versions:
        raise RuntimeError("PostgreSQL's server binaries are not installed")
    return versions[-1].parent


def missing_tools() -> list[str]:
    """What this machine lacks to start a cluster (empty: it can)."""
    missing = [name for name in ("patroni", "etcd") if shutil.which(name) is None]
    if not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")):
        missing.append("postgresql server")
    return missing


def _as_postgres_user() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _get_json(url: str, timeout: float = 2.0) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (loopback)
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        body = error.read()
        return error.code, json.loads(body) if body.startswith(b"{") else {}


@dataclass
class Node:
    name: str
    pg_port: int
    api_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def api(self) -> str:
        return f"http://{HOST}:{self.api_port}"

    def status(self) -> dict[str, object]:
        try:
            return _get_json(f"{self.api}/patroni")[1]
        except OSError:
            return {}

    def role(self) -> str:
        """``primary``, ``replica`` or ``""`` (unreachable or not running)."""
        status = self.status()
        if status.get("state") != "running":
            return ""
        return "primary" if status.get("role") in ("master", "primary") else "replica"

    def postmaster_pid(self) -> int:
        pid_file = self.directory / "data" / "postmaster.pid"
        return int(pid_file.read_text().split()[0])


@dataclass
class Cluster:
    root: Path
    etcd_port: int
    nodes: list[Node] = field(default_factory=list)
    etcd: subprocess.Popen[bytes] | None = None

    # -- addresses ---------------------------------------------------------------------------
    def url(self, user: str, password: str, database: str) -> str:
        """libpq's multi-host URL of the cluster's current primary, whichever node it is."""
        hosts = ",".join(f"{HOST}:{node.pg_port}" for node in self.nodes)
        return f"postgres://{user}:{password}@{hosts}/{database}?target_session_attrs=read-write"

    def superuser_url(self, database: str = "postgres") -> str:
        return self.url("postgres", SUPERUSER_PASSWORD, database)

    # -- life cycle --------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> None:
        self.etcd = subprocess.Popen(
            [
                "etcd",
                "--name=ha-test",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls=http://{HOST}:{self.etcd_port}",
                f"--advertise-client-urls=http://{HOST}:{self.etcd_port}",
                f"--listen-peer-urls=http://{HOST}:{free_port()}",
                "--initial-cluster-state=new",
                "--log-level=error",
            ],
            stdout=(self.root / "etcd.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        self._wait(lambda: self._etcd_healthy(), timeout, "etcd did not start")
        first, *others = self.nodes
        self._start_node(first)
        self._wait(lambda: first.role() == "primary", timeout, f"{first.name} did not bootstrap")
        for node in others:
            self._start_node(node)
        self._wait(self.replicating, timeout, "the standby did not start replicating")

    def stop(self, *, remove: bool = True) -> None:
        for node in self.nodes:
            if node.process and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            if node.process:
                try:
                    node.process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()
            self._kill_postmaster_left(node)
        if self.etcd and self.etcd.poll() is None:
            self.etcd.terminate()
            self.etcd.wait(timeout=30)
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)

    def _start_node(self, node: Node) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        config = node.directory / "patroni.yml"
        config.write_text(yaml.safe_dump(self._node_config(node)))
        if os.geteuid() == 0:
            shutil.chown(node.directory, "postgres", "postgres")
            shutil.chown(config, "postgres", "postgres")
        node.process = subprocess.Popen(
            [*_as_postgres_user(), "patroni", str(config)],
            stdout=(self.root / f"{node.name}.log").open("ab"),
            stderr=subprocess.STDOUT,
            cwd=node.directory,
        )

    def _node_config(self, node: Node) -> dict[str, Any]:
        """The shipped configuration, moved onto the loopback address and this directory."""
        config: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
        config["name"] = node.name
        config["namespace"] = f"/countersign-test-{self.etcd_port}/"
        config["restapi"].update(
            listen=f"{HOST}:{node.api_port}", connect_address=f"{HOST}:{node.api_port}"
        )
        config["etcd3"] = {"hosts": [f"{HOST}:{self.etcd_port}"]}
        config["bootstrap"]["pg_hba"] = [
            "local all all trust",
            f"host replication replicator {HOST}/32 scram-sha-256",
            f"host all all {HOST}/32 scram-sha-256",
        ]
        postgresql = config["postgresql"]
        postgresql.update(
            listen=f"{HOST}:{node.pg_port}",
            connect_address=f"{HOST}:{node.pg_port}",
            data_dir=str(node.directory / "data"),
            bin_dir=str(postgres_bin_dir()),
            pgpass=str(node.directory / "pgpass"),
        )
        postgresql["parameters"]["unix_socket_directories"] = str(node.directory)
        postgresql["authentication"]["superuser"]["password"] = SUPERUSER_PASSWORD
        for role in ("replication", "rewind"):
            postgresql["authentication"][role]["password"] = f"ha-{role}"
        return config

    # -- state -------------------------------------------------------------------------------
    def primary(self) -> Node | None:
        primaries = [node for node in self.nodes if node.role() == "primary"]
        return primaries[0] if len(primaries) == 1 else None

    def replicating(self) -> bool:
        """One primary, and every other node a running standby that the primary lists as
        its synchronous standby."""
        primary = self.primary()
        if primary is None:
            return False
        replication: list[dict[str, Any]] = primary.status().get("replication") or []  # type: ignore[assignment]
        standbys = {
            entry.get("application_name")
            for entry in replication
            if entry.get("sync_state") == "sync"
        }
        return all(node.name in standbys for node in self.nodes if node is not primary)

    def kill_primary_postmaster(self) -> Node:
        """SIGKILL the primary's postmaster (its Patroni keeps running and notices)."""
        primary = self.primary()
        if primary is None:
            raise RuntimeError("no primary to kill")
        os.kill(primary.postmaster_pid(), signal.SIGKILL)
        return primary

    def _etcd_healthy(self) -> bool:
        try:
            return _get_json(f"http://{HOST}:{self.etcd_port}/health")[0] == 200
        except OSError:
            return False

    @staticmethod
    def _kill_postmaster_left(node: Node) -> None:
        with contextlib.suppress(OSError, ValueError):
            os.kill(node.postmaster_pid(), signal.SIGKILL)

    @staticmethod
    def _wait(check: object, timeout: float, failure: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():  # type: ignore[operator]
                return
            time.sleep(0.3)
        raise RuntimeError(failure)

    def wait(self, check: object, timeout: float, failure: str) -> None:
        self._wait(check, timeout, failure)


def new_cluster(nodes: int = 2) -> Cluster:
    """A cluster in a new temporary directory (not started)."""
    root = Path(tempfile.mkdtemp(prefix="countersign-ha-"))
    os.chmod(root, 0o755)  # noqa: S103 (the postgres user enters it; each node's data is 0700)
    cluster = Cluster(root=root, etcd_port=free_port())
    cluster.nodes = [
        Node(f"node{index}", free_port(), free_port(), root / f"node{index}")
        for index in range(1, nodes + 1)
    ]
    return cluster


def main() -> None:
    if missing := missing_tools():
        raise SystemExit(f"missing: {', '.join(missing)} (apt-get install patroni etcd-server)")
    cluster = new_cluster()
    try:
        cluster.start()
        print(f"primary: {cluster.primary().name}")  # type: ignore[union-attr]
        print(f"superuser URL: {cluster.superuser_url()}")
        print("Ctrl-C stops the cluster and removes its directory.")
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
