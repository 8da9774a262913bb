"""DuckDB over a table: a view of exactly the files the scan planner chose.

`register` plans a read (latest or as of an instant, optionally filtered) and
creates a temporary view over the planned base files, cast to the table's
schema, so the set of files is fixed when the view is made (snapshot
isolation: a later commit is not in it). `query` runs one SQL statement over
such a view, pruned by the statement's WHERE when it is a plain single-table
SELECT of the table; DuckDB applies the whole statement to the rows, so the
pruning only ever saves reading files.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from timeline import table_schema
from timeline.errors import BadInputError, TandemError
from timeline.format.meta_fields import COMMIT_TIME
from timeline.query.reader import read_files
from timeline.query.scan import ScanPlan, plan_scan
from timeline.table import Table

if TYPE_CHECKING:
    import duckdb as duckdb_module

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# errors in the statement itself (bad input); any other DuckDB error is the engine failing
STATEMENT_ERRORS = (
    "ParserException",
    "SyntaxException",
    "BinderException",
    "CatalogException",
    "ConversionException",
    "InvalidInputException",
    "NotImplementedException",
    "OutOfRangeException",
    "TypeMismatchException",
    "InvalidTypeException",
)


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError as err:
        raise BadInputError("DuckDB is not installed: pip install 'tandem-lake[duckdb]'") from err
    return duckdb


def register(
    connection: duckdb_module.DuckDBPyConnection,
    path: str,
    name: str = "t",
    as_of: str | None = None,
    where: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> ScanPlan:
    """Plan a read of the table at `path` and create the temporary view `name` over its files.

    `where` (DuckDB SQL) prunes partitions and files and is applied to the view's
    rows; `since`/`until` make it an incremental read. Returns the plan.
    """
    _duckdb()
    plan = plan_scan(Table.open(path), where, as_of=as_of, since=since, until=until, dialect="duckdb")
    create_view(connection, plan, name, where)
    return plan


def create_view(
    connection: duckdb_module.DuckDBPyConnection, plan: ScanPlan, name: str, where: str | None = None
) -> None:
    """The temporary view `name`: the plan's files, its incremental range, `where` if given."""
    sql = select_sql(connection, plan)
    if where:
        sql = f"SELECT * FROM ({sql}) AS {quote(name)} WHERE {where}"
    _run(connection, f"CREATE OR REPLACE TEMPORARY VIEW {quote(name)} AS {sql}", f"view {name}")


def select_sql(connection: duckdb_module.DuckDBPyConnection, plan: ScanPlan) -> str:
    """A SELECT of the plan's rows in the output schema (every column cast; missing ones NULL)."""
    table = plan.table
    schema = output_schema(plan)
    if not len(schema):
        raise BadInputError(f"{table.uri} has no files and no recorded schema: there are no columns to query")
    if plan.since is not None and not table.config.populate_meta_fields:
        raise BadInputError(f"{table.uri} does not populate meta fields: an incremental read needs {COMMIT_TIME}")
    types = [str(t) for t in connection.from_arrow(schema.empty_table()).types]
    if not plan.splits:
        columns = ", ".join(f"CAST(NULL AS {t}) AS {quote(f.name)}" for f, t in zip(schema, types, strict=True))
        return f"SELECT {columns} WHERE false"
    source = _files_source(connection, plan)
    present = {c.casefold() for c in _run(connection, f"SELECT * FROM {source} LIMIT 0", "the files").columns}
    columns = ", ".join(
        f"CAST({quote(f.name) if f.name.casefold() in present else 'NULL'} AS {t}) AS {quote(f.name)}"
        for f, t in zip(schema, types, strict=True)
    )
    sql = f"SELECT {columns} FROM {source}"
    if plan.since is not None:
        sql += f" WHERE {quote(COMMIT_TIME)} > '{plan.since}'"
        if plan.until is not None:
            sql += f" AND {quote(COMMIT_TIME)} <= '{plan.until}'"
    return sql


def _files_source(connection: duckdb_module.DuckDBPyConnection, plan: ScanPlan) -> str:
    """`read_parquet` of the files (local), or an Arrow table read by pyarrow (object stores, merge-on-read
    slices with logs, merged as they are read, and bootstrapped skeletons, joined with their sources)."""
    storage = plan.table.storage
    merged = plan.merge is not None and bool(plan.merge.logs)  # slices with logs: merged by Tandem's reader
    joined = any(s.source is not None for s in plan.splits)  # bootstrapped skeletons: joined by Tandem's reader
    if not storage.is_s3 and not merged and not joined:
        files = ", ".join("'" + storage.full(s.path).replace("'", "''") + "'" for s in plan.splits)
        return f"read_parquet([{files}], union_by_name = true, hive_partitioning = false)"
    rows = read_files(storage, plan.splits, merge=plan.merge)
    hidden = f"_tandem_files_{id(plan):x}"
    connection.register(hidden, rows)
    return quote(hidden)


def output_schema(plan: ScanPlan) -> pa.Schema:
    """The columns a read of `plan` gives: the planner's schema, else the table's recorded one (no files yet).

    Tables that do not populate the meta columns carry null ones in Spark-written
    files; like Hudi's readers, leave them out.
    """
    schema = plan.schema if plan.schema is not None else table_schema.declared(plan.table)
    if not plan.table.config.populate_meta_fields:
        schema = table_schema.without_meta(schema)
    return schema


def query(path: str, sql: str, name: str = "t", as_of: str | None = None) -> tuple[pa.Table, ScanPlan]:
    """Run `sql` (DuckDB SQL) over the table at `path`, as `name` and as the table's name; rows and the plan."""
    duckdb = _duckdb()
    table = Table.open(path)
    names = view_names(table, name)
    plan = plan_query(table, sql, names, as_of)
    connection = duckdb.connect()
    try:
        try:
            connection.execute("SET TimeZone = 'UTC'")
        except duckdb.Error:
            pass  # without the ICU extension zoned timestamps are UTC anyway
        create_view(connection, plan, names[0])
        for other in names[1:]:  # the same files, read once
            _run(connection, f"CREATE TEMPORARY VIEW {quote(other)} AS SELECT * FROM {quote(names[0])}", other)
        rows = _run(connection, sql, "query", fetch=True)
    finally:
        connection.close()
    return rows, plan


def view_names(table: Table, name: str) -> list[str]:
    """`name`, and the table's own name when it is a plain identifier (and another name)."""
    own = table.config.name
    return [name] + ([own] if own and IDENTIFIER.fullmatch(own) and own.casefold() != name.casefold() else [])


def plan_query(table: Table, sql: str, names: list[str], as_of: str | None = None) -> ScanPlan:
    """The plan of a query: pruned by its WHERE when that is safe (see `query_filter`), else unpruned."""
    where, why_not = _query_filter(sql, names)
    if where is not None:
        try:
            return plan_scan(table, where, as_of=as_of, dialect="duckdb")
        except BadInputError:
            # e.g. a WHERE naming a SELECT alias: DuckDB decides what the statement means (and reports its errors)
            why_not = "the planner cannot read it"
    plan = plan_scan(table, None, as_of=as_of)
    if why_not:
        plan = plan.noted(f"the query's WHERE is not used for pruning: {why_not}")
    return plan


def query_filter(sql: str, names: list[str]) -> str | None:
    """The WHERE of `sql` over the table's columns, when pruning the table by it cannot change the result.

    That is a single SELECT whose only table reference anywhere is its FROM, the
    table (under one of `names`), without joins: every row the query sees from
    the table passed the WHERE. Anything else (joins, set operations, CTEs,
    subqueries over the table, DuckDB syntax sqlglot does not read) gives None.
    """
    return _query_filter(sql, names)[0]


def _query_filter(sql: str, names: list[str]) -> tuple[str | None, str | None]:
    """(the WHERE to prune by, None) or (None, why not; None when there is no WHERE to speak of)."""
    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return None, None  # DuckDB syntax sqlglot does not know (or bad SQL, which DuckDB reports)
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        return None, "not a single SELECT" if any(s and s.find(exp.Where) for s in statements) else None
    select = statements[0]
    where = select.args.get("where")
    if where is None:
        return None, "a WHERE inside the statement only" if select.find(exp.Where) else None
    if select.args.get("with_") or select.args.get("with"):
        return None, "a WITH clause"
    source = select.args.get("from_") or select.args.get("from")
    if source is None or select.args.get("joins") or select.args.get("laterals"):
        return None, "the SELECT reads more than the table"
    tables = list(select.find_all(exp.Table))
    if len(tables) != 1 or tables[0] is not source.this or tables[0].args.get("db") or tables[0].args.get("catalog"):
        return None, "the statement reads more than the table, or the table more than once"
    table = tables[0]
    if not isinstance(table.this, exp.Identifier) or table.name.casefold() not in {n.casefold() for n in names}:
        return None, "the SELECT does not read the table"
    qualifiers = {table.name.casefold()} | ({table.alias.casefold()} if table.alias else set())
    condition = where.this.copy()
    for column in list(condition.find_all(exp.Column)):
        qualifier = column.args.get("table")
        if qualifier is None:
            continue
        if column.args.get("db") or column.args.get("catalog") or qualifier.name.casefold() not in qualifiers:
            return None, f"{column.sql(dialect='duckdb')} is not a column of the table"
        column.set("table", None)
    return condition.sql(dialect="duckdb"), None


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _run(connection: duckdb_module.DuckDBPyConnection, sql: str, what: str, fetch: bool = False) -> Any:
    """`connection.sql(sql)` (all its rows as Arrow if `fetch`), DuckDB's error as one line."""
    duckdb = _duckdb()
    try:
        result = connection.sql(sql)
        if not fetch:
            return result
        return result.to_arrow_table() if result is not None else pa.table({})
    except duckdb.Error as err:
        line = next((s.strip() for s in str(err).splitlines() if s.strip()), type(err).__name__)
        if type(err).__name__ in STATEMENT_ERRORS:
            raise BadInputError(f"{what}: {line}") from err
        raise TandemError(f"{what}: DuckDB failed: {line}") from err
