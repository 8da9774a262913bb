"""One plain JVM (no Spark session) with Hudi 0.15's bundle on the classpath, driven through py4j: for tests that
call Hudi's Java classes directly (its lock providers). Classpath as `spark.jars` would load it: the reference
venv's Spark jars, then the bundle, then any extra jars."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.hudi_reference.client import installed_readers

JAVA_OPTIONS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def reference_spec() -> dict | None:
    """The hudi-0.15 reader the installer completed, or None."""
    return installed_readers().get("hudi-0.15")


def missing(what: str) -> None:
    """Fail in CI (the test command installs everything), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed (make hudi-reference)")
    pytest.skip(f"{what} is not installed: `make hudi-reference`")


@contextmanager
def java_gateway(spec: dict, log_dir: Path, extra_jars: Sequence[str] = (), options: Sequence[str] = ()) -> Iterator:
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    venv = Path(spec["python"]).parent.parent
    spark_jars = next(venv.glob("lib/python3*/site-packages/pyspark/jars"))
    py4j_jar = next((venv / "share" / "py4j").glob("py4j*.jar"))
    with open(log_dir / "jvm.log", "w") as log:
        port = launch_gateway(
            jarpath=str(py4j_jar),
            classpath=":".join([f"{spark_jars}/*", spec["jar"], *extra_jars]),
            javaopts=[*options, *JAVA_OPTIONS],
            die_on_exit=True,
            redirect_stdout=log,
            redirect_stderr=log,
        )
        gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
        try:
            yield gateway
        finally:
            gateway.shutdown()
