"""Real servers for tests, started on 127.0.0.1 and waited for with a deadline."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
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


class MotoServer:
    """moto's HTTP server in its own process: the S3 and DynamoDB APIs on loopback.

    Started through `chaos.moto_serial` (one request at a time) so that
    conditional writes are atomic, as on real DynamoDB.
    """

    def __init__(self, log_dir: Path, threaded: bool = False) -> None:
        self.threaded = threaded
        self.port = free_port()
        self.log = open(log_dir / f"moto-{self.port}.log", "wb")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chaos.moto_serial", "127.0.0.1", str(self.port)]
            + (["--threaded"] if self.threaded else []),
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


ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar"


class ZooKeeperServer:
    """A standalone ZooKeeper from Debian's jars, with a generated config on a free port."""

    def __init__(self, work_dir: Path, tick_ms: int = 200) -> None:
        self.dir = work_dir
        self.port = free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen | None = None
        (work_dir / "data").mkdir(parents=True, exist_ok=True)
        (work_dir / "zoo.cfg").write_text(
            f"tickTime={tick_ms}\ndataDir={work_dir / 'data'}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
            f"minSessionTimeout={tick_ms * 2}\nmaxSessionTimeout=60000\n"
        )

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ZooKeeperServer:
        if not Path(ZOOKEEPER_CLASSPATH).exists():
            raise RuntimeError("ZooKeeper is not installed: run `make test` (it installs Debian's zookeeper)")
        log = open(self.dir / "zookeeper.log", "ab")
        self.proc = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-cp",
                ZOOKEEPER_CLASSPATH,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(self.dir / "zoo.cfg"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, 60, self.proc)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def relay(handler: BaseHTTPRequestHandler, port: int, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """Send the handler's request (with `headers`, the body re-framed by length) to 127.0.0.1:`port` and
    write the response back to its client; the response status. For test proxies in front of moto."""
    headers = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP | {"content-length", "expect"}}
    if body or handler.command in ("PUT", "POST"):
        headers["Content-Length"] = str(len(body))
    upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        upstream.request(handler.command, handler.path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
    finally:
        upstream.close()
    handler.send_response_only(response.status, response.reason)
    for key, value in response.getheaders():
        if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
            handler.send_header(key, value)
    length = response.getheader("Content-Length", "0") if handler.command == "HEAD" else str(len(data))
    handler.send_header("Content-Length", length)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
    return response.status


TRINO_MANIFEST = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tandem" / "trino" / "trino.json"
TRINO_CATALOG = "hudi"
TRINO_JVM = ("-Xmx1G", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
             "-Djdk.attach.allowAttachSelf=true", "-XX:+EnableDynamicAgentLoading")  # fmt: skip


class TrinoServer:
    """A one-node Trino (scripts/install-trino.sh: its Hudi plugin only) on a free loopback port. Its catalog
    `hudi` finds tables in AWS Glue and reads them from S3, both at `endpoint` (moto), and from the local file
    system as `local:///PATH` locations. Ready once it has run a query (before, it has no worker node)."""

    def __init__(self, work: Path, endpoint: str, deadline_s: float = 120) -> None:
        import json

        if not TRINO_MANIFEST.exists():
            raise RuntimeError(f"Trino is not installed ({TRINO_MANIFEST} missing): run `make trino`")
        manifest = json.loads(TRINO_MANIFEST.read_text())
        self.home, self.java = Path(manifest["home"]), manifest["java"]
        self.work, self.endpoint, self.deadline_s = work, endpoint, deadline_s
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = None

    def _configure(self) -> Path:
        etc = self.work / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        (etc / "config.properties").write_text(
            f"coordinator=true\nnode-scheduler.include-coordinator=true\nhttp-server.http.port={self.port}\n"
            f"discovery.uri=http://127.0.0.1:{self.port}\nquery.max-memory=512MB\nquery.max-memory-per-node=512MB\n"
            "http-server.log.enabled=false\n"
        )
        (etc / "log.properties").write_text("io.trino=WARN\n")
        (etc / "catalog" / f"{TRINO_CATALOG}.properties").write_text(
            "connector.name=hudi\nhive.metastore=glue\nhive.metastore.glue.region=us-east-1\n"
            f"hive.metastore.glue.endpoint-url={self.endpoint}\nhive.metastore.glue.aws-access-key=testing\n"
            "hive.metastore.glue.aws-secret-key=testing\nhive.metastore-cache-ttl=0s\n"
            f"fs.native-s3.enabled=true\ns3.endpoint={self.endpoint}\ns3.region=us-east-1\n"
            "s3.path-style-access=true\ns3.aws-access-key=testing\ns3.aws-secret-key=testing\n"
            "fs.native-local.enabled=true\nlocal.location=/\n"
        )
        return etc

    def start(self) -> TrinoServer:
        """Start and wait until it answers; a start that fails stops what it started."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> TrinoServer:
        etc = self._configure()
        self.log = open(self.work / "trino.log", "wb")
        self.proc = subprocess.Popen(
            [self.java, *TRINO_JVM, "-cp", f"{self.home}/lib/*", "-Dnode.environment=tandem", "-Dnode.id=tandem",
             f"-Dnode.data-dir={self.work / 'data'}", f"-Dconfig={etc / 'config.properties'}",
             f"-Dlog.levels-file={etc / 'log.properties'}", f"-Dcatalog.config-dir={etc / 'catalog'}",
             f"-Dplugin.dir={self.home / 'plugin'}", "io.trino.server.TrinoServer"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, self.deadline_s, self.proc)
        self._wait_until_it_runs_a_query()
        return self

    def _wait_until_it_runs_a_query(self) -> None:
        import trino

        end = time.monotonic() + self.deadline_s
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"Trino exited with {self.proc.returncode}; see {self.work / 'trino.log'}")
            try:
                self.query(f"SELECT count(*) FROM {TRINO_CATALOG}.information_schema.schemata")
                return
            except (trino.exceptions.TrinoQueryError, trino.exceptions.TrinoConnectionError):
                if time.monotonic() > end:
                    raise
            time.sleep(0.2)

    def connect(self, schema: str | None = None):
        import trino

        return trino.dbapi.connect(host="127.0.0.1", port=self.port, user="tandem", catalog=TRINO_CATALOG,
                                   schema=schema)  # fmt: skip

    def query(self, sql: str, schema: str | None = None) -> list[list]:
        """Every row of one statement."""
        return self.execute(sql, schema).fetchall()

    def execute(self, sql: str, schema: str | None = None):
        """A cursor on one statement, its first answer in; asked again while the node has not announced the
        catalog yet (a few seconds after start, Trino's NO_NODES_AVAILABLE)."""
        import trino

        end = time.monotonic() + self.deadline_s
        while True:
            cursor = self.connect(schema).cursor()
            try:
                cursor.execute(sql)
                return cursor
            except trino.exceptions.TrinoQueryError as err:
                if err.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > end:
                    raise
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()
