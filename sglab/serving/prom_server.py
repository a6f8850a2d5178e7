"""A real Prometheus for the rehearsal (Debian's `prometheus`, installed by tools/install-prometheus.sh).

It scrapes each simulator with the target labels a PodMonitor gives the cluster's pods (namespace, pod,
sglab_stack, sglab_arm, sglab_revision, rollouts_pod_template_hash), so the judge runs the very queries it
runs in production. The process lives in a temporary directory (config, TSDB) and dies with its parent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sglab.serving.prometheus import Prometheus
from sglab.core.children import free_port, spawn, stop as stop_child

PROMETHEUS_ENV = "SGLAB_PROMETHEUS"  # the binary, if not /usr/bin/prometheus or on PATH
READY_TIMEOUT_S = 60.0
INSTALL_FIX = "install it: bash tools/install-prometheus.sh (Debian's prometheus package, as make test does)"


class PrometheusUnavailable(Exception):
    def __init__(self, message: str, fix: str = INSTALL_FIX) -> None:
        super().__init__(message)
        self.fix = fix


def prometheus_binary() -> str:
    candidates = [os.environ.get(PROMETHEUS_ENV), "/usr/bin/prometheus", shutil.which("prometheus")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise PrometheusUnavailable("no Prometheus server binary found (the rehearsal scrapes the simulators with a "
                                "real Prometheus)")


@dataclass(frozen=True)
class ScrapeTarget:
    address: str  # host:port
    labels: dict[str, str]


@dataclass
class PrometheusServer:
    """`with PrometheusServer(targets, interval_s=1) as prom:` -> prom.url serves the HTTP API."""

    targets: list[ScrapeTarget]
    interval_s: float = 1.0
    url: str = ""
    process: subprocess.Popen | None = None
    workdir: Path | None = None
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def config_text(self) -> str:
        interval = f"{self.interval_s:g}s"
        return yaml.safe_dump({
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [{
                "job_name": "sglab-rehearsal", "scrape_interval": interval, "scrape_timeout": interval,
                "metrics_path": "/metrics", "honor_labels": False,
                "static_configs": [{"targets": [t.address], "labels": dict(t.labels)} for t in self.targets],
            }],
        }, sort_keys=False)

    def start(self) -> "PrometheusServer":
        binary = prometheus_binary()
        self._tmp = tempfile.TemporaryDirectory(prefix="sglab-prometheus-")
        self.workdir = Path(self._tmp.name)
        (self.workdir / "prometheus.yml").write_text(self.config_text())
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(self.workdir / "prometheus.log", "wb")
        try:
            self.process = spawn(  # dies with this process, however it ends (sglab.core.children)
                [binary, f"--config.file={self.workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                 "--storage.tsdb.retention.time=2h", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        with Prometheus(self.url, timeout_s=2.0) as client:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    tail = (self.workdir / "prometheus.log").read_text(errors="replace")[-1500:] if self.workdir else ""
                    self.stop()
                    raise PrometheusUnavailable(f"Prometheus exited with code {self.process.returncode}:\n{tail}",
                                                "see the log above")
                if client.ready():
                    return
                time.sleep(0.2)
        self.stop()
        raise PrometheusUnavailable(f"Prometheus did not become ready within {READY_TIMEOUT_S:g} s",
                                    "the machine may be overloaded; retry")

    def stop(self) -> None:
        if self.process is not None:
            stop_child(self.process, timeout_s=10)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "PrometheusServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
