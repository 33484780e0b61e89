"""A real local Ray cluster for the tests: a head and worker nodes, each a real raylet.

`python ray_cluster.py NODES CPUS` starts the cluster (ray.cluster_utils.Cluster, the same thing
Ray's own tests use), prints the head's address, and then obeys lines on stdin: `remove I` takes
worker node I away (its raylet and workers die), `quit` shuts everything down. `LocalRayCluster`
runs that script as a separate process, so the test process never becomes a Ray driver.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


class LocalRayCluster:
    def __init__(self, nodes: int = 2, cpus_per_node: int = 1) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (held for the cluster's life; closed in close())
        self.proc = subprocess.Popen([sys.executable, __file__, str(nodes), str(cpus_per_node)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("address "):
            self.proc.kill()
            self._log.seek(0)
            raise RuntimeError(f"the Ray cluster did not start: {self._log.read()[-3000:].decode(errors='replace')}")
        self.address, *self.worker_nodes = line.split()[1:]  # the worker nodes' ids, in `remove` order

    def remove_node(self, index: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"remove {index}\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()

    def running_tasks(self) -> list[Any]:
        """Tasks the cluster's state API reports as running (any job)."""
        out = subprocess.run([sys.executable, "-c", (
            "import json, sys; from ray.util.state import list_tasks\n"
            f"ts = list_tasks(address={self.address!r}, filters=[('state', '=', 'RUNNING')], raise_on_missing_output=False)\n"
            "print(json.dumps([t.name for t in ts]))")], capture_output=True, text=True, timeout=60,
            env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})  # keep 127.0.0.1 (see evaluator/backends/ray_cluster.py)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        import json

        return json.loads(out.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
        self._log.close()

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cmdline(pid: int | str) -> str:
    """A process's command line ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def task_processes(name: str, node: str | None = None) -> list[int]:
    """PIDs of Ray worker processes now running a task of `name` (Ray titles them `ray::NAME`),
    on the node with id `node` when given (a worker is a child of its node's raylet)."""
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and _cmdline(e.name).startswith(f"ray::{name}")]
    return [p for p in pids if node is None or f"--node_id={node}" in _cmdline(_parent(p))]


def exposed_ports() -> list[str]:
    """Listening TCP sockets of this machine's Ray processes bound to an address other than loopback."""
    inodes: set[str] = set()
    for entry in Path("/proc").iterdir():
        cmd = _cmdline(entry.name) if entry.name.isdigit() else ""
        if not any(word in cmd for word in ("raylet", "gcs_server", "ray::", "/ray/", "ray.")):
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    exposed = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state, inode = row.split()[1], row.split()[3], row.split()[9]
            addr = local.split(":")[0]
            # 127.0.0.1, as itself or IPv4-mapped (::ffff:127.0.0.1), or ::1
            loopback = addr in ("0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000")
            if state == "0A" and inode in inodes and not loopback:
                exposed.append(f"{table}: {local}")
    return exposed


def _serve(nodes: int, cpus: int) -> None:
    from ray.cluster_utils import Cluster

    with socket.socket() as s:  # a free port: another Ray on this machine may hold the default one
        s.bind(("127.0.0.1", 0))
        dashboard_port = s.getsockname()[1]
    # Every node, its services and the dashboard on the loopback address: nothing is reachable from outside.
    loopback = {"node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": cpus, "include_dashboard": True, "dashboard_port": dashboard_port,
                                      "dashboard_host": "127.0.0.1", **loopback})
    workers = [cluster.add_node(num_cpus=cpus, **loopback) for _ in range(nodes - 1)]
    cluster.wait_for_nodes()
    print("address", cluster.address, *(w.node_id for w in workers), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["remove"]:
            cluster.remove_node(workers[int(cmd[1])], allow_graceful=False)
            print("removed", flush=True)
        elif cmd[:1] == ["quit"]:
            break
    cluster.shutdown()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    _serve(int(sys.argv[1]), int(sys.argv[2]))
    time.sleep(0.1)
