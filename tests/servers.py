"""Real servers for tests, started on 127.0.0.1 and waited for with a deadline."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, deadline_s: float, proc: subprocess.Popen | None = None) -> None:
    """Poll until something accepts on the port; fail if the process dies or time runs out."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {deadline_s}s")


def moto_server_command() -> list[str]:
    local = Path(sys.executable).with_name("moto_server")
    return [str(local) if local.exists() else shutil.which("moto_server") or "moto_server"]


class MotoServer:
    """`moto_server` in its own process: the S3 and DynamoDB HTTP APIs on loopback."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.log = open(log_dir / f"moto-{self.port}.log", "wb")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        self.proc = subprocess.Popen(
            [*moto_server_command(), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ},
        )
        wait_for_port(self.port, 30, self.proc)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()
