"""The reference session: Apache Hudi's own Spark reader and writer, for the tests to judge Tandem's tables by.

Run by the reference venv's python (pyspark 3.5, see scripts/install-hudi-reference.sh), never by the project's:

    python server.py --jar hudi-spark3.5-bundle_2.12-0.15.0.jar

It starts ONE SparkSession and serves requests as JSON lines: one request per line on stdin, one response per
line on the protocol stream (the original stdout; fd 1 itself is pointed at stderr before Spark starts, so that
nothing the JVM prints can break a response). Requests:

    {"id": 1, "op": "ping"}
    {"id": 2, "op": "read", "path": P, "out": DIR, "metadata": true,
     "query": "snapshot" | "as_of" | "incremental", "as_of": T, "begin": T0, "end": T1, "options": {...}}
    {"id": 3, "op": "batch", "requests": [read, read, ...]}      -> {"id": 3, "ok": true, "results": [...]}
    {"id": 4, "op": "write", "path": P, "input": FILE.parquet, "operation": "upsert", "options": {...}}
    {"id": 5, "op": "sql", "sql": "..."}                           -> rows as JSON (small answers only)
    {"id": 7, "op": "jvm", "code": "...", "args": {...}}           -> {"result": ...}: the code runs with `spark`,
        `jvm` (py4j's view of the JVM) and `args`, and sets `result` (JSON); it probes Hudi's own classes (its
        HFile and log readers) directly, below the Spark data source
    {"id": 6, "op": "exit"}

A read writes its rows (meta columns included) as a parquet file in DIR (collected as Arrow batches: one Spark
job; DIR is replaced) and answers {"ok": true, "out": DIR}. The reads of a batch run on 4 threads ("parallel": N).
Any failure answers {"ok": false, "error": {"class", "message", "java_class", "java_message", "java_causes"}}
with the Java exception's class, message and causes when the JVM raised one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import traceback
from concurrent.futures import ThreadPoolExecutor


def quiet_log4j(folder: str) -> str:
    path = os.path.join(folder, "log4j2.properties")
    with open(path, "w") as out:
        out.write(
            "rootLogger.level = error\n"
            "rootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\n"
            "appender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n\n"
        )
    return path


def start_session(jar: str, scratch: str, memory: str):
    from pyspark.sql import SparkSession

    log4j = quiet_log4j(scratch)
    java_options = f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j}"
    # a short-lived JVM of many small queries: C1 only and the serial GC halve a test run on 2 busy cores (the
    # first reads are mostly class loading and compiling)
    java_options += " " + os.environ.get("TANDEM_HUDI_REF_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("tandem-hudi-reference")
        .config("spark.jars", jar)
        .config("spark.driver.memory", memory)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
        .config("spark.local.dir", os.path.join(scratch, "local"))
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read(spark, request: dict) -> dict:
    options = {}
    options["hoodie.metadata.enable"] = "true" if request.get("metadata", True) else "false"
    query = request.get("query", "snapshot")
    if query == "snapshot":
        options["hoodie.datasource.query.type"] = "snapshot"
    elif query == "as_of":
        options["hoodie.datasource.query.type"] = "snapshot"
        options["as.of.instant"] = str(request["as_of"])
    elif query == "incremental":
        options["hoodie.datasource.query.type"] = "incremental"
        options["hoodie.datasource.read.begin.instanttime"] = str(request["begin"])
        if request.get("end") is not None:
            options["hoodie.datasource.read.end.instanttime"] = str(request["end"])
    else:
        raise ValueError(f"unknown query {query!r}")
    options.update(request.get("options") or {})
    frame = spark.read.format("hudi").options(**options).load(request["path"])
    out = request["out"]
    shutil.rmtree(out, ignore_errors=True)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:  # a venv without pyarrow: Spark writes the parquet files itself (one more job)
        frame.write.mode("overwrite").parquet(out)
        return {"out": out}
    # collected as Arrow batches (one job, no output commit protocol), written as one parquet file
    batches = frame._collect_as_arrow()
    rows = pa.Table.from_batches(batches) if batches else to_arrow_schema(frame.schema).empty_table()
    os.makedirs(out)
    pq.write_table(rows, os.path.join(out, "part-0.parquet"))
    return {"out": out, "rows": rows.num_rows}


def write(spark, request: dict) -> dict:
    frame = spark.read.parquet(request["input"])
    options = dict(request.get("options") or {})
    options["hoodie.datasource.write.operation"] = request.get("operation", "upsert")
    frame.write.format("hudi").options(**options).mode(request.get("mode", "append")).save(request["path"])
    return {}


def sql(spark, request: dict) -> dict:
    rows = spark.sql(request["sql"]).collect()
    return {"rows": [row.asDict(recursive=True) for row in rows]}


def jvm(spark, request: dict) -> dict:
    scope = {"spark": spark, "jvm": spark._jvm, "args": request.get("args") or {}, "result": None}
    exec(request["code"], scope)  # test-side code of this project only: the server reads its own stdin
    return {"result": scope["result"]}


def error_of(err: BaseException) -> dict:
    """The failure as JSON: the Java exception's class and message when the JVM raised one."""
    found = {"class": type(err).__name__, "message": str(err).splitlines()[0] if str(err) else ""}
    java = getattr(err, "java_exception", None)
    if java is not None:
        try:
            found["java_class"] = java.getClass().getName()
            found["java_message"] = str(java.getMessage())
            cause = java.getCause()
            causes = []
            while cause is not None and len(causes) < 8:
                causes.append(f"{cause.getClass().getName()}: {cause.getMessage()}")
                cause = cause.getCause()
            found["java_causes"] = causes
        except Exception:  # the gateway itself failed: the Python side's text is all there is
            pass
    elif err.__class__.__module__.startswith("pyspark"):
        found["message"] = str(err)[:4000]
    found["traceback"] = traceback.format_exc()[-4000:]
    return found


def handle(spark, request: dict) -> dict:
    op = request.get("op")
    try:
        if op == "ping":
            body = {"spark": spark.version}
        elif op == "read":
            body = read(spark, request)
        elif op == "write":
            body = write(spark, request)
        elif op == "sql":
            body = sql(spark, request)
        elif op == "jvm":
            body = jvm(spark, request)
        elif op == "batch":  # reads side by side: each spends most of its time planning on the driver
            with ThreadPoolExecutor(max(1, int(request.get("parallel", 4)))) as pool:
                body = {"results": list(pool.map(lambda r: handle(spark, r), request["requests"]))}
        else:
            raise ValueError(f"unknown op {op!r}")
        return {"id": request.get("id"), "ok": True, **body}
    except Exception as err:  # answered, never raised: one bad table must not end the session
        return {"id": request.get("id"), "ok": False, "error": error_of(err)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jar", required=True, help="the Hudi bundle, then any further jars (comma-separated)")
    parser.add_argument("--memory", default="1g")
    parser.add_argument("--scratch", default=None)
    args = parser.parse_args()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the JVM inherits fd 1: whatever it prints lands on stderr
    sys.stdout = sys.stderr
    scratch = args.scratch or tempfile.mkdtemp(prefix="hudi-ref-")
    try:
        spark = start_session(args.jar, scratch, args.memory)
    except Exception as err:
        protocol.write(json.dumps({"id": None, "ok": False, "error": error_of(err)}) + "\n")
        return 1
    protocol.write(json.dumps({"id": None, "ok": True, "ready": True, "spark": spark.version}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as err:
            protocol.write(json.dumps({"id": None, "ok": False, "error": error_of(err)}) + "\n")
            continue
        if request.get("op") == "exit":
            protocol.write(json.dumps({"id": request.get("id"), "ok": True}) + "\n")
            break
        protocol.write(json.dumps(handle(spark, request), default=str) + "\n")
    spark.stop()
    if args.scratch is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
