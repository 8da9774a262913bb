"""Coordinator settings: readable Python names, settable with Hudi's key names.

Hudi keys are accepted where Hudi has one (`from_hudi`); unknown `hoodie.*`
keys are refused rather than silently ignored, so a typo never goes unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from timeline.errors import BadInputError

OPERATIONS = ("insert", "bulk_insert", "upsert", "delete", "insert_overwrite")

EAGER = "EAGER"
LAZY = "LAZY"
FAILED_WRITES_POLICIES = (EAGER, LAZY)
SIMPLE = "SIMPLE"
GLOBAL_SIMPLE = "GLOBAL_SIMPLE"
BLOOM = "BLOOM"
GLOBAL_BLOOM = "GLOBAL_BLOOM"
INDEX_TYPES = (SIMPLE, GLOBAL_SIMPLE, BLOOM, GLOBAL_BLOOM)


@dataclass(frozen=True)
class CoordinatorConfig:
    lock_uri: str = "file"
    failed_writes_policy: str = LAZY  # safe for several writers (see recovery); EAGER rolls back every pending write
    heartbeat_interval_ms: int = 60_000
    heartbeat_tolerable_misses: int = 2
    max_delta_commits: int = 10
    # Hudi's hoodie.compact.inline.max.delta.commits: delta commits of a merge-on-read table after which its
    # next compaction is scheduled (NUM_COMMITS)
    compaction_delta_commits: int = 5
    # Hudi's hoodie.compact.schedule.inline: a writer plans the next compaction right after its commit when one
    # is due, for a compaction worker to execute (off by default: without a worker a plan would wait, and
    # archival with it)
    schedule_compaction: bool = False
    clean_policy: str = "KEEP_LATEST_COMMITS"
    commits_retained: int = 10
    file_versions_retained: int = 1
    auto_clean: bool = False
    archive_min_commits: int = 20
    archive_max_commits: int = 30
    auto_archive: bool = True
    # Hudi's hoodie.metadata.enable: a write to a table without a metadata table builds one first
    metadata_enabled: bool = True
    # Hudi's hoodie.index.type: SIMPLE keys a record by (record key, partition path); GLOBAL_SIMPLE by its key
    # alone. The BLOOM variants tag the same way but open only the files whose key range and bloom filter (in
    # the MDT's bloom_filters index) may hold an incoming key; without that index they behave as SIMPLE.
    index_type: str = BLOOM
    # GLOBAL_SIMPLE only: a record whose partition changed moves there (deleted from the old one), else stays put
    update_partition_path: bool = True
    # Hudi's hoodie.metadata.index.*.enable: True turns the index on for the table before the write (built
    # from the live files' footers), False turns it off; None (unset) keeps what the table has.
    column_stats_enabled: bool | None = None
    bloom_filter_enabled: bool | None = None

    def __post_init__(self) -> None:
        if self.failed_writes_policy not in FAILED_WRITES_POLICIES:
            raise BadInputError(
                f"hoodie.cleaner.policy.failed.writes={self.failed_writes_policy!r} (one of EAGER, LAZY)"
            )
        if self.index_type not in INDEX_TYPES:
            raise BadInputError(f"hoodie.index.type={self.index_type!r} (one of {', '.join(INDEX_TYPES)})")
        if self.heartbeat_interval_ms <= 0 or self.heartbeat_tolerable_misses < 1:
            raise BadInputError("heartbeat interval must be positive and tolerable misses at least 1")
        if (
            self.max_delta_commits < 1
            or self.compaction_delta_commits < 1
            or self.commits_retained < 1
            or self.file_versions_retained < 1
        ):
            raise BadInputError("max delta commits and retention counts must be at least 1")
        if not 1 <= self.archive_min_commits < self.archive_max_commits:
            raise BadInputError("archival needs 1 <= hoodie.keep.min.commits < hoodie.keep.max.commits")
        if self.archive_min_commits <= self.commits_retained:
            raise BadInputError("hoodie.keep.min.commits must exceed hoodie.cleaner.commits.retained")

    @property
    def global_index(self) -> bool:
        """Record keys are unique across partitions: tagging looks a key up in every partition."""
        return self.index_type in (GLOBAL_SIMPLE, GLOBAL_BLOOM)

    @property
    def bloom_index(self) -> bool:
        """Tagging consults the bloom_filters index (when the table keeps one)."""
        return self.index_type in (BLOOM, GLOBAL_BLOOM)

    @property
    def heartbeat_expiry_s(self) -> float:
        """A heartbeat older than this means its writer is gone."""
        return self.heartbeat_interval_ms * self.heartbeat_tolerable_misses / 1000

    @property
    def retained(self) -> int:
        """The retention that applies to the configured clean policy."""
        return (
            self.file_versions_retained if self.clean_policy == "KEEP_LATEST_FILE_VERSIONS" else self.commits_retained
        )

    @staticmethod
    def from_hudi(props: dict[str, str], base: CoordinatorConfig | None = None) -> CoordinatorConfig:
        """Apply Hudi-named (or Python-named) settings on top of `base`."""
        from locks.config import uri_from_hudi_config

        base = base or CoordinatorConfig()
        changes: dict[str, object] = {}
        lock_props = {k: v for k, v in props.items() if k.startswith("hoodie.write.lock.")}
        if lock_props:
            changes["lock_uri"] = uri_from_hudi_config(lock_props)
        names = {f.name: f.type for f in fields(CoordinatorConfig)}
        for key, value in props.items():
            if key in lock_props:
                continue
            name = HUDI_KEYS.get(key, key)
            if name not in names:
                raise BadInputError(f"unknown setting {key!r}")
            changes[name] = _convert(key, value, names[name])
        return replace(base, **changes)


HUDI_KEYS = {
    "hoodie.cleaner.policy.failed.writes": "failed_writes_policy",
    "hoodie.client.heartbeat.interval_in_ms": "heartbeat_interval_ms",
    "hoodie.client.heartbeat.tolerable.misses": "heartbeat_tolerable_misses",
    "hoodie.metadata.compact.max.delta.commits": "max_delta_commits",
    "hoodie.compact.inline.max.delta.commits": "compaction_delta_commits",
    "hoodie.compact.schedule.inline": "schedule_compaction",
    "hoodie.cleaner.policy": "clean_policy",
    "hoodie.cleaner.commits.retained": "commits_retained",
    "hoodie.cleaner.fileversions.retained": "file_versions_retained",
    "hoodie.clean.automatic": "auto_clean",
    "hoodie.keep.min.commits": "archive_min_commits",
    "hoodie.keep.max.commits": "archive_max_commits",
    "hoodie.archive.automatic": "auto_archive",
    "hoodie.metadata.enable": "metadata_enabled",
    "hoodie.index.type": "index_type",
    "hoodie.simple.index.update.partition.path": "update_partition_path",
    "hoodie.bloom.index.update.partition.path": "update_partition_path",
    "hoodie.metadata.index.column.stats.enable": "column_stats_enabled",
    "hoodie.metadata.index.bloom.filter.enable": "bloom_filter_enabled",
}


def _convert(key: str, value: str, kind: object) -> object:
    text = str(value).strip()
    try:
        if kind in (int, "int"):
            return int(text)
        if kind in (float, "float"):
            return float(text)
        if kind in (bool, "bool", "bool | None"):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
    except ValueError as err:
        raise BadInputError(f"setting {key}={value!r} is not a valid {kind}") from err
    return text.upper() if key.endswith(("policy", "failed.writes", "index.type", "index_type")) else text


def parse_settings(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line, as a dict."""
    props = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInputError(f"setting {pair!r} is not KEY=VALUE")
        props[key.strip()] = value.strip()
    return props
