"""The project side of the reference session: start `server.py` under the reference venv once, send it requests,
get pyarrow tables back. Installed by scripts/install-hudi-reference.sh (`make hudi-reference`)."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SERVER = Path(__file__).with_name("server.py")
DEFAULT_READER = "hudi-0.15"
START_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 300.0


def reference_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tandem" / "hudi-ref"


def installed_readers() -> dict[str, dict]:
    """The readers the installer completed: name -> {python, jar, artifact, pyspark}."""
    manifest = reference_root() / "readers.json"
    try:
        readers = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return {}
    return {
        name: spec
        for name, spec in readers.items()
        if os.access(spec.get("python", ""), os.X_OK) and os.path.isfile(spec.get("jar", ""))
    }


def aws_jars(reader: str = DEFAULT_READER) -> list[str]:
    """The DynamoDB lock jars installed beside `reader` (hudi-aws with the lock client and the AWS SDK Hudi
    pins; scripts/install-hudi-reference.sh), or none."""
    try:
        jars = json.loads((reference_root() / "hudi-aws.json").read_text())[reader]["jars"]
    except (OSError, ValueError, KeyError):
        return []
    return jars if jars and all(os.path.isfile(jar) for jar in jars) else []


# The reference only ever talks to endpoints on 127.0.0.1: dummy credentials, and the region Hudi 0.15's
# DynamoDB client (built with an endpoint but no region) takes from the SDK's chain.
LOCAL_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, deepest first (from /proc's children lists)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found = _descendants(child) + [child] + found
    return found


class HudiError(Exception):
    """A request the reference answered with an error: the Java exception's class and message when there is one."""

    def __init__(self, error: dict) -> None:
        self.error = error
        self.java_class = error.get("java_class")
        self.java_message = error.get("java_message")
        super().__init__(
            f"{self.java_class}: {self.java_message}"
            if self.java_class
            else f"{error.get('class')}: {error.get('message')}"
        )


class ReferenceDied(RuntimeError):
    pass


@dataclass
class Read:
    """One read of a table by the reference: a snapshot, as of an instant, or incremental (begin, end]."""

    path: str
    query: str = "snapshot"
    as_of: str | None = None
    begin: str | None = None
    end: str | None = None
    metadata: bool = True
    options: dict = field(default_factory=dict)

    def request(self, out: str) -> dict:
        body = {"op": "read", "path": str(self.path), "query": self.query, "metadata": self.metadata, "out": out}
        for name in ("as_of", "begin", "end"):
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        if self.options:
            body["options"] = self.options
        return body


class HudiReference:
    """One long-lived Spark session with Hudi's bundle on it, in the reference venv."""

    def __init__(self, reader: str = DEFAULT_READER, memory: str = "1g") -> None:
        readers = installed_readers()
        if reader not in readers:
            raise FileNotFoundError(
                f"the Hudi reference {reader!r} is not installed (run `make hudi-reference`); "
                f"found {sorted(readers) or 'none'} under {reference_root()}"
            )
        self.name = reader
        self.spec = readers[reader]
        self.scratch = Path(tempfile.mkdtemp(prefix=f"tandem-{reader}-"))
        self.log_path = self.scratch / "server.log"
        self._log = open(self.log_path, "wb")
        self._next = 0
        self._reads = 0
        env = {**LOCAL_AWS, **os.environ, "PYSPARK_PYTHON": self.spec["python"], "SPARK_LOCAL_IP": "127.0.0.1"}
        for name in ("SPARK_HOME", "PYTHONPATH", "PYSPARK_SUBMIT_ARGS", "VIRTUAL_ENV"):
            env.pop(name, None)  # the project venv's pyspark 4 must not leak into the reference's
        jars = ",".join([self.spec["jar"], *aws_jars(reader)])  # Hudi's DynamoDB lock provider too, when installed
        self.process = subprocess.Popen(
            [self.spec["python"], str(SERVER), "--jar", jars, "--memory", memory],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=self.scratch,
        )
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        self._buffer = b""
        ready = self._receive(START_TIMEOUT_S)
        if not ready.get("ok"):
            self.close()
            raise HudiError(ready.get("error", {}))
        self.spark_version = ready.get("spark")

    # -- protocol

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise ReferenceDied(f"no answer from the Hudi reference in {timeout:.0f} s; {self._tail()}")
            if not self._selector.select(left):
                continue
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                self.process.wait(timeout=10)
                raise ReferenceDied(f"the Hudi reference exited ({self.process.returncode}); {self._tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _tail(self) -> str:
        self._log.flush()
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "server log: " + text[-3000:]

    def _send(self, body: dict) -> None:
        if self.process.poll() is not None:
            raise ReferenceDied(f"the Hudi reference is not running ({self.process.returncode}); {self._tail()}")
        self._next += 1
        body = {**body, "id": self._next}
        self.process.stdin.write((json.dumps(body) + "\n").encode())
        self.process.stdin.flush()

    def request(self, body: dict, timeout: float = REQUEST_TIMEOUT_S) -> dict:
        self._send(body)
        answer = self._receive(timeout)
        if answer.get("id") != self._next:
            raise ReferenceDied(f"answer {answer.get('id')} to request {self._next}")
        return answer

    # -- reads and writes

    def _out(self) -> str:
        self._reads += 1
        return str(self.scratch / f"read-{self._reads}")

    def read_many(self, reads: list[Read], timeout: float = REQUEST_TIMEOUT_S) -> list[pa.Table | HudiError]:
        """All reads in one round trip; each answer is the rows (meta columns included) or the HudiError."""
        outs = [self._out() for _ in reads]
        answer = self.request(
            {"op": "batch", "requests": [r.request(o) for r, o in zip(reads, outs, strict=True)]}, timeout
        )
        if not answer.get("ok"):
            raise HudiError(answer.get("error", {}))
        results: list[pa.Table | HudiError] = []
        for result, out in zip(answer["results"], outs, strict=True):
            if result.get("ok"):
                results.append(pq.read_table(out))
            else:
                results.append(HudiError(result.get("error", {})))
            shutil.rmtree(out, ignore_errors=True)
        return results

    def read(self, path, query: str = "snapshot", metadata: bool = True, **kwargs) -> pa.Table:
        """One read; raises HudiError with the Java exception when Hudi refuses."""
        (result,) = self.read_many([Read(str(path), query, metadata=metadata, **kwargs)])
        if isinstance(result, HudiError):
            raise result
        return result

    def _write_request(self, path, rows: pa.Table, operation: str, options: dict, mode: str) -> dict:
        self._reads += 1
        source = self.scratch / f"input-{self._reads}.parquet"
        pq.write_table(rows, source)
        body = {"op": "write", "path": str(path), "input": str(source), "operation": operation}
        return {**body, "options": options, "mode": mode}

    def write(self, path, rows: pa.Table, operation: str, options: dict, mode: str = "append") -> None:
        """Hudi's Spark writer commits `rows` to the table at `path` (options: Hudi's write keys)."""
        body = self._write_request(path, rows, operation, options, mode)
        try:
            answer = self.request(body)
        finally:
            Path(body["input"]).unlink(missing_ok=True)
        if not answer.get("ok"):
            raise HudiError(answer.get("error", {}))

    def start_write(self, path, rows: pa.Table, operation: str, options: dict) -> None:
        """Send a write and return at once, for a test that then kills this session mid-write (`kill`)."""
        self._send(self._write_request(path, rows, operation, options, "append"))

    def finish_write(self, timeout: float = REQUEST_TIMEOUT_S) -> None:
        """The answer to `start_write`: returns when Hudi committed, raises HudiError when it refused."""
        answer = self._receive(timeout)
        if answer.get("id") != self._next:
            raise ReferenceDied(f"answer {answer.get('id')} to request {self._next}")
        if not answer.get("ok"):
            raise HudiError(answer.get("error", {}))

    def freeze(self, stop: bool = True) -> None:
        """SIGSTOP (or with stop=False, SIGCONT) the driver's JVM, as a long GC pause or a stalled host would."""
        for pid in _descendants(self.process.pid):
            try:
                os.kill(pid, signal.SIGSTOP if stop else signal.SIGCONT)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL the Spark driver's JVM and then this session's Python, as a lost machine ends a Spark job:
        no shutdown hook runs (pyspark's JVM would otherwise exit cleanly once its Python parent is gone)."""
        for pid in _descendants(self.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._kill()

    def sql(self, text: str) -> list[dict]:
        answer = self.request({"op": "sql", "sql": text})
        if not answer.get("ok"):
            raise HudiError(answer.get("error", {}))
        return answer["rows"]

    def jvm(self, code: str, **args):
        """Run `code` in the reference session with `spark`, `jvm` and `args`; its `result` (JSON) comes back."""
        answer = self.request({"op": "jvm", "code": code, "args": args})
        if not answer.get("ok"):
            raise HudiError(answer.get("error", {}))
        return answer["result"]

    # -- life cycle

    def _kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.request({"op": "exit"}, timeout=30)
                self.process.wait(timeout=60)
            except (ReferenceDied, OSError, subprocess.TimeoutExpired, ValueError):
                self._kill()
        self._selector.close()
        self._log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> HudiReference:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
