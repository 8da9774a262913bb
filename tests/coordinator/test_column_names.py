"""Any input column name is written and read back, or refused as bad input: never another failure."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.write.column_names import check_input_columns
from coordinator.write.writer import LocalWriter
from timeline.errors import BadInputError
from timeline.format.meta_fields import META_COLUMNS
from timeline.query.reader import read_view
from timeline.table import Table

# Names the writers, readers and planners use for their own columns, and near misses of them.
INTERNAL = [
    "__order",
    "__order_",
    "__partition",
    "__path",
    "_tandem_target",
    "_tandem_delete",
    "_tandem_order",
    "_tandem_index_key",
    "__all_partitions__",
    *META_COLUMNS,
    "_hoodie_is_deleted",
    "id_",
    "ID",
    "City",
]
NAMES = st.one_of(st.sampled_from(INTERNAL), st.text(min_size=0, max_size=8))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(NAMES, min_size=1, max_size=3, unique=True))
def test_any_column_name_is_written_or_refused_as_bad_input(tmp_path_factory, names: list[str]) -> None:
    written_or_refused(tmp_path_factory.mktemp("names") / "t", names)


@pytest.mark.parametrize("name", INTERNAL)
def test_every_internal_name_is_written_or_refused_as_bad_input(tmp_path: Path, name: str) -> None:
    written_or_refused(tmp_path / "t", [name])


def written_or_refused(base: Path, names: list[str]) -> None:
    """An upsert of rows with extra columns `names`: read back as written, or refused by the name check."""
    table = Table.create(str(base), "t", ["id"], ["city"])
    columns = {"id": [1, 2, 1], "city": ["a", "b", "a"]}
    extra = [n for n in names if n not in columns]
    data = pa.table({**columns, **{n: [10 * i, 10 * i + 1, 10 * i + 2] for i, n in enumerate(extra)}})
    try:
        LocalWriter(table).write(data, "upsert")
    except BadInputError:
        with pytest.raises(BadInputError):
            check_input_columns(data.schema)  # refused by the one check, before anything was written
        assert Table.open(str(base)).timeline().completed() == []
        return
    rows = {r["id"]: r for r in read_view(table, table.view()).to_pylist()}
    assert set(rows) == {1, 2}
    for i, name in enumerate(extra):
        if name not in META_COLUMNS:
            assert rows[1][name] == 10 * i + 2 and rows[2][name] == 10 * i + 1, name


@pytest.mark.parametrize(
    ("names", "reason"),
    [
        (["a.b"], "not a valid Avro field name"),
        ([""], "not a valid Avro field name"),
        (["1x"], "not a valid Avro field name"),
        (["Id"], "differ only in case"),
        (["_tandem_target"], "reserved"),
    ],
)
def test_names_no_hudi_reader_holds_are_refused_before_begin(tmp_path: Path, names: list[str], reason: str) -> None:
    table = Table.create(str(tmp_path / "t"), "t", ["id"], [])
    data = pa.table({"id": [1], **{n: [1] for n in names}})
    with pytest.raises(BadInputError, match=reason):
        LocalWriter(table).write(data, "insert")
    assert not (tmp_path / "t" / ".hoodie" / ".temp").exists() or not any(
        (tmp_path / "t" / ".hoodie").glob("*.inflight")
    )


def test_nested_field_names_are_checked_too() -> None:
    nested = pa.schema([("id", pa.int64()), ("s", pa.struct([("ok", pa.int64()), ("not ok", pa.int64())]))])
    with pytest.raises(BadInputError, match=r"'s\.not ok'"):
        check_input_columns(nested)
