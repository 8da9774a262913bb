"""Keep a catalog in step with a table (Hudi's meta sync): the database, the table (two for merge-on-read), its
schema as the table's files have it now, and its partitions, added, moved and dropped as commits made them.

Taken under the table's lock (`tandem sync`, and a write's sync after its commit), so two syncs never interleave,
and on a state read there: the partitions the table has now (its view: the metadata table's list when it is
healthy) against the catalog's, in full, not since the last sync (Hudi's incremental sync reads the commits since
`last_commit_time_sync` and lists storage when they are archived; the full diff needs neither). The catalog table
is written first with the new schema, its partitions next, and `last_commit_time_sync` last: a sync cut short is
finished by the next one. A sync never puts an older state over a newer one (a catalog whose
`last_commit_time_sync` is later is left alone; a completed restore counts as the newest change), and none runs
while a restore is pending. The column list is replaced as Hudi replaces it (added
columns appear); a change Hudi's sync refuses (a column's type changed other than int to bigint or float to
double, other partition keys) is refused with the columns named, and nothing of that table is written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from coordinator.catalog.catalog_table import LAST_SYNCED, CatalogTable, Column, describe, partition_values
from coordinator.catalog.glue import GlueCatalog, StoredTable
from coordinator.catalog.hive_types import change_allowed
from timeline import table_schema
from timeline.errors import BadInputError, ConflictError
from timeline.format.instant import RESTORE, WRITE_ACTIONS
from timeline.table import Table


class SchemaSyncError(BadInputError):
    """The table's schema changed in a way the catalog's readers cannot follow."""


@dataclass
class SyncReport:
    database: str
    synced: str  # the instant whose state the catalog now holds ("" for a table with no commit)
    tables: list[str] = field(default_factory=list)
    created_database: bool = False
    created_tables: list[str] = field(default_factory=list)
    added_columns: list[str] = field(default_factory=list)
    widened_columns: list[str] = field(default_factory=list)
    added_partitions: int = 0
    moved_partitions: int = 0
    dropped_partitions: int = 0
    newer_in_catalog: list[str] = field(default_factory=list)  # tables left alone: the catalog holds a later state

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def sync(
    table: Table,
    catalog: GlueCatalog,
    database: str,
    name: str | None = None,
    location: str | None = None,
    still_locked: Callable[[], None] = lambda: None,
) -> SyncReport:
    """Bring `database` in `catalog` to the table's current state (the caller holds the table's lock, and
    `still_locked` raises once it is lost: checked before each change of the catalog)."""
    timeline = table.timeline()
    if timeline.restoring_to() is not None:
        raise ConflictError("a restore is pending: `tandem recover` finishes it, then sync")
    changes = [i.time for i in timeline.completed() if i.action in WRITE_ACTIONS or i.action == RESTORE]
    synced = max(changes, default="")  # a restore is a newer state than the commits it removed
    schema = table_schema.stored(table, timeline) or table_schema.declared(table)  # declared: no commit yet
    report = SyncReport(database, synced)
    report.created_database = catalog.ensure_database(database)
    partitions = sorted(table.view().partitions())
    for wanted in describe(table, schema, synced, name, location):
        report.tables.append(wanted.name)
        _sync_one(table, catalog, database, wanted, partitions, report, still_locked)
    return report


def _sync_one(
    table: Table,
    catalog: GlueCatalog,
    database: str,
    wanted: CatalogTable,
    partitions: list[str],
    report: SyncReport,
    still_locked: Callable[[], None],
) -> None:
    stored = catalog.table(database, wanted.name)
    if stored is not None and stored.parameters.get(LAST_SYNCED, "") > report.synced:
        report.newer_in_catalog.append(wanted.name)
        return
    if stored is None:
        report.created_tables.append(wanted.name)
    else:
        added, widened = check_evolution(stored, wanted, f"{database}.{wanted.name}")
        report.added_columns = sorted(set(report.added_columns) | set(added))
        report.widened_columns = sorted(set(report.widened_columns) | set(widened))
    before = dict(wanted.parameters)
    before[LAST_SYNCED] = stored.parameters.get(LAST_SYNCED, "") if stored is not None else ""
    still_locked()
    catalog.put_table(database, replace(wanted, parameters=before), exists=stored is not None)
    fields, hive_style = table.config.partition_fields, table.config.hive_style
    want = {tuple(partition_values(p, fields, hive_style)): p for p in partitions} if fields else {}
    have = catalog.partitions(database, wanted.name) if fields else {}
    new = [(v, p) for v, p in want.items() if v not in have]
    moved = [(v, p) for v, p in want.items() if v in have and have[v] != wanted.partition_location(p)]
    gone = [v for v in have if v not in want]
    still_locked()
    catalog.add_partitions(database, wanted, new)
    catalog.update_partitions(database, wanted, moved)
    still_locked()
    catalog.drop_partitions(database, wanted.name, gone)
    report.added_partitions += len(new)
    report.moved_partitions += len(moved)
    report.dropped_partitions += len(gone)
    still_locked()
    catalog.put_table(database, wanted, exists=True)  # last_commit_time_sync: this state is all there


def check_evolution(stored: StoredTable, wanted: CatalogTable, where: str) -> tuple[list[str], list[str]]:
    """(columns added, columns widened) from the catalog's table to the wanted one; SchemaSyncError for a change
    its readers cannot follow."""
    if [c.name for c in stored.partition_keys] != [c.name for c in wanted.partition_keys]:
        raise SchemaSyncError(
            f"{where} is partitioned by {_names(stored.partition_keys)} in the catalog and by "
            f"{_names(wanted.partition_keys)} in the table: a catalog table's partition keys cannot change "
            "(drop the catalog table, then sync)"
        )
    old = {c.name: c.type for c in stored.columns}
    new = {c.name: c.type for c in wanted.columns}
    changed = [f"{n} {old[n]} -> {new[n]}" for n in new if n in old and not change_allowed(old[n], new[n])]
    if changed:
        raise SchemaSyncError(
            f"{where}: column type change(s) a Hive-style catalog refuses ({', '.join(changed)}; only int -> bigint "
            "and float -> double widen in place); nothing of the table was changed in the catalog"
        )
    added = [n for n in new if n not in old]
    widened = [n for n in new if n in old and old[n] != new[n]]
    return added, widened


def _names(columns: list[Column]) -> str:
    return "(" + ", ".join(c.name for c in columns) + ")"
