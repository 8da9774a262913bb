"""Random damage to every kind of metadata-table file, then a read and a write: no damaged byte is believed.

Each seed builds a small table whose metadata table has every kind of file (a compacted base of
`files` and of each index, log files, a seal, deltacommit, compaction and clean instants, the
properties; in Tandem's previous format, whose files these kinds are), picks one file of a random kind and
damages it one way: a flipped bit or byte at a
random offset (in an HFile, of a random block or its trailer), a truncation at a random length, or deletion. Then:
- a read must return exactly the committed rows (the model, which the `hudi` package confirms
  without ever opening our metadata table) or fail with an error of the exit-code contract;
- an upsert must either refuse (an error of the contract; the table then reads as before) or
  commit, after which every row of the model is read by both readers and the metadata table
  lists what storage holds.
A damage that changes nothing the table means (a flipped bit in padding) passes on its own merit.
"""

from __future__ import annotations

import copy
import random
import shutil
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from chaos.checker import Violation, check_listing, check_readers
from chaos.junk import KEY, Model, keep_if_violated, settings, write
from coordinator.protocol.locking import table_lock
from coordinator.services.steps import compact
from timeline.errors import TandemError
from timeline.hfile.block import HEADER, HEADER_SIZE
from timeline.hfile.trailer import TRAILER_SIZE
from timeline.mdt.layout import MDT_DIR
from timeline.query.reader import read_view
from timeline.table import Table

DAMAGES = ("flip-bit", "flip-byte", "truncate", "delete")


@dataclass
class DamageResult:
    seed: int
    file: str = ""
    kind: str = ""
    damage: str = ""
    read: str = ""  # "rows", "fallback" or the error
    write: str = ""  # "committed" or the error
    violations: list[dict] = field(default_factory=list)
    kept_dir: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def kind_of(path: str) -> str:
    """The kind of an MDT file, from its path under the MDT's folder."""
    name = path.rpartition("/")[2]
    if path.startswith(".hoodie/"):
        return "properties" if name == "hoodie.properties" else f"instant:{name.split('.', 1)[1]}"
    if name.endswith((".parquet", ".hfile")):
        return f"base:{path.split('/')[0]}"
    if ".log." in name:
        return "log"
    return f"other:{name}"


def mdt_files(table: Table) -> dict[str, list[str]]:
    """Every file of the MDT (relative to the data table's base) by kind."""
    mdt = table.metadata()
    prefix = f"{MDT_DIR}/"
    out: dict[str, list[str]] = {}
    for entry in mdt.storage.list_files(""):
        rel = entry.path
        if "/.temp/" in f"/{rel}" or "/.heartbeat/" in f"/{rel}":
            continue
        out.setdefault(kind_of(rel), []).append(prefix + rel)
    return out


def build(base: str, rng: random.Random, hudi_format: bool) -> tuple[Table, Model]:
    """A table whose MDT holds a compacted base (with index bases), later logs and several instant kinds, in
    Hudi's format (HFile bases, Hudi log blocks) or Tandem's previous one."""
    layout = rng.choice(["none", "one"])
    table = Table.create(base, "fuzz", [KEY], ["part"] if layout == "one" else [], hudi_format=hudi_format)
    model = Model(layout, rng)
    write(table, model, list(range(10)), "insert")
    write(table, model, rng.sample(range(14), 4), "upsert")
    lock = table_lock(table, settings())
    try:
        compact(table, settings(), lock, force=True)
    finally:
        lock.close()
    write(table, model, rng.sample(range(14), 3), "upsert")
    write(table, model, rng.sample(range(10), 2), "delete")
    return Table.open(base), model


def damage(table: Table, path: str, how: str, rng: random.Random) -> str:
    """Apply one damage to `path`; returns what was done."""
    storage = table.storage
    if how == "delete":
        storage.delete(path)
        return how
    data = bytearray(storage.read_bytes(path))
    if not data:
        storage.delete(path)
        return "delete (empty file)"
    at = _offset(bytes(data), path, rng)
    if how == "truncate":
        storage.write_bytes(path, bytes(data[:at]))
        return f"truncate at {at} of {len(data)}"
    data[at] ^= 1 << rng.randrange(8) if how == "flip-bit" else rng.randrange(1, 256)
    storage.write_bytes(path, bytes(data))
    return f"{how} at {at} of {len(data)}"


def _offset(data: bytes, path: str, rng: random.Random) -> int:
    """Where to damage: in an HFile, a random byte of a random one of its blocks or of its trailer, so the
    few bytes of the index, file info and trailer are hit as often as the data blocks; elsewhere any byte."""
    if not path.endswith(".hfile"):
        return rng.randrange(len(data))
    regions, at = [], 0
    while at + HEADER_SIZE <= len(data) - TRAILER_SIZE:
        size = HEADER_SIZE + HEADER.unpack_from(data, at)[1]
        if size <= HEADER_SIZE or at + size > len(data) - TRAILER_SIZE:
            break
        regions.append((at, at + size))
        at += size
    regions.append((max(len(data) - TRAILER_SIZE, 0), len(data)))
    start, end = rng.choice(regions)
    return rng.randrange(start, end) if end > start else rng.randrange(len(data))


def _rows(table: Table) -> dict[str, dict]:
    rows = read_view(table, table.view()).to_pylist()
    return {r[KEY]: {c: r.get(c) for c in r if not c.startswith("_hoodie_")} for r in rows}


def _template(work: Path, layout: int, hudi_format: bool) -> tuple[Path, Model]:
    """One built table per layout, format and run folder, copied for each damage."""
    folder = work / f"template-{layout}{'-hudi' if hudi_format else ''}"
    found = _TEMPLATES.get(folder)
    if found is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, model = build(str(folder), random.Random(layout), hudi_format)
        found = _TEMPLATES[folder] = (folder, model)
    return found


_TEMPLATES: dict[Path, tuple[Path, Model]] = {}


def run_seed(
    seed: int, work: Path, use_hudi: bool = True, kind: str | None = None, hudi_format: bool = False
) -> DamageResult:
    """A copy of a built table (its MDT in Hudi's format or the previous one), one damage (of a file whose kind
    starts with `kind`), a read and a write."""
    rng = random.Random(seed)
    result = DamageResult(seed)
    base = work / f"seed-{seed}{'-hudi' if hudi_format else ''}"
    template, built = _template(work, seed % 3, hudi_format)
    shutil.copytree(template, base)
    model = copy.deepcopy(built)
    model.rng = rng
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallbacks are reported; here the checks judge
        table = Table.open(str(base))
        files = mdt_files(table)
        result.kind = rng.choice(sorted(k for k in files if k.startswith(kind or "")))
        result.file = rng.choice(sorted(files[result.kind]))
        result.damage = damage(table, result.file, rng.choice(DAMAGES), rng)
        expected = model.expected()
        try:
            seen = _rows(Table.open(str(base)))
            result.read = "rows"
            if seen != expected:
                result.violations.append(asdict(Violation("9-damaged-read", "a read after the damage answered wrong")))
        except TandemError as err:
            result.read = f"exit {err.exit_code}: {err}"
        except Exception as err:
            result.violations.append(asdict(Violation("5-exit-codes", f"read: {type(err).__name__}: {err}")))
        try:
            write(Table.open(str(base)), model, rng.sample(range(14), 3), "upsert")
            result.write = "committed"
        except TandemError as err:
            result.write = f"exit {err.exit_code}: {err}"
        except Exception as err:
            result.violations.append(asdict(Violation("5-exit-codes", f"write: {type(err).__name__}: {err}")))
        if result.write == "committed":
            table = Table.open(str(base))
            found = check_readers(table, KEY, model.expected(), use_hudi) + check_listing(table, table.timeline())
            result.violations += [asdict(v) for v in found]
    keep_if_violated(result, base)
    return result
