"""One small storage interface over `pyarrow.fs`, plus create-if-absent.

Every path a caller passes is relative to the table base; a path that would
leave the base is refused, so no bug or bad input can touch files elsewhere.
On S3 every mutating call first checks, once per endpoint and bucket in a
process, that the store honours create-if-absent (`timeline/io/store_probe.py`).
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlparse

import pyarrow.fs as pafs

from timeline.errors import BadInputError, PathEscapeError
from timeline.io import read_once, store_probe


@dataclass(frozen=True)
class FileEntry:
    """A file below the table base: its relative path and size in bytes."""

    path: str
    size: int


_FILE, _DIRECTORY = pafs.FileType.File, pafs.FileType.Directory


class LocalEntry(NamedTuple):
    """A local folder entry with what callers read of a pyarrow FileInfo (an S3 listing's entries): a tuple
    is built in two thirds of a FileInfo's time and keeps its name (a FileInfo splits its path on each
    `base_name`), and a timeline lookup lists a few hundred entries."""

    path: str
    base_name: str
    type: pafs.FileType
    size: int | None
    mtime_ns: int | None


def normalize_relative(rel: str) -> str:
    """Return `rel` normalised, or raise if it is absolute or escapes the base."""
    if rel.startswith("/") or "\\" in rel or "\x00" in rel:
        raise PathEscapeError(f"path {rel!r} is not relative to the table base")
    norm = posixpath.normpath(rel) if rel else "."
    if norm == ".." or norm.startswith("../"):
        raise PathEscapeError(f"path {rel!r} escapes the table base")
    return "" if norm == "." else norm


def s3_endpoint() -> str | None:
    """The S3 endpoint from the standard AWS environment variables, if set."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


class Storage:
    """Files of one table base, local or `s3://bucket/prefix`."""

    def __init__(self, base_uri: str) -> None:
        self.base_uri = base_uri.rstrip("/")
        parsed = urlparse(self.base_uri)
        self.is_s3 = parsed.scheme in ("s3", "s3a")
        if self.is_s3:
            self.bucket = parsed.netloc
            self.prefix = parsed.path.strip("/")
            self.fs: pafs.FileSystem = _s3_filesystem()
            self.root = f"{self.bucket}/{self.prefix}".rstrip("/")
        elif parsed.scheme in ("", "file"):
            local = parsed.path if parsed.scheme == "file" else self.base_uri
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(local)
        else:
            raise BadInputError(f"unsupported storage scheme {parsed.scheme!r} in {base_uri!r}")

    def require_fencing(self, lock_uri: str | None = None) -> bool:
        """Refuse an S3 store that does not honour create-if-absent (`timeline/io/store_probe.py`).

        Every mutating call on S3 runs this first (probed once per endpoint and
        bucket in a process, then a dict lookup). Callers that know the lock
        pass its URI: with `TANDEM_ALLOW_UNFENCED_STORE=1` an unfenced store is
        then accepted only under a zk:// or dynamodb:// lock. True when storage
        fences (always locally); False when only the override let it through.
        """
        if not self.is_s3:
            return True
        probe_dir = self.key(store_probe.PROBE_DIR)
        return store_probe.require_fencing(_s3(), self.bucket, probe_dir, lock_uri).fenced

    def _before_write(self, *rels: str) -> None:
        """Every mutation: reads of the folders above it are stale now (`read_once`); on S3, the fence probe."""
        for rel in rels:
            read_once.forget(self.full(rel))
        if self.is_s3:
            self.require_fencing()

    def full(self, rel: str) -> str:
        """Filesystem path of `rel`; refuses paths that leave the base."""
        norm = normalize_relative(rel)
        return f"{self.root}/{norm}" if norm else self.root

    def uri(self, rel: str) -> str:
        """A URI for `rel` that other readers (Spark, hudi) understand."""
        norm = normalize_relative(rel)
        return f"{self.base_uri}/{norm}" if norm else self.base_uri

    def relative(self, path: str) -> str | None:
        """`path` relative to the base: Tandem records relative paths, Hudi's writers
        absolute ones (`file:/...`, `/...`, `s3a://...`). None when it lies outside the base."""
        parsed = urlparse(path)
        if not parsed.scheme and not path.startswith("/"):
            return path
        if parsed.scheme not in (("s3", "s3a") if self.is_s3 else ("", "file")):
            return None
        location = f"{parsed.netloc}{parsed.path}" if self.is_s3 else parsed.path
        if location.startswith(self.root + "/"):
            return location[len(self.root) + 1 :]
        return None

    def sub(self, rel: str) -> Storage:
        """Storage rooted at a folder below this base (the metadata table)."""
        return Storage(self.uri(rel))

    def exists(self, rel: str) -> bool:
        """Whether a file is there. On S3 one HEAD: pyarrow would LIST too, to see if `rel` is a folder."""
        if self.is_s3:
            return _s3_exists(self.bucket, self.key(rel))
        return self.fs.get_file_info(self.full(rel)).type != pafs.FileType.NotFound

    def is_dir(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full(rel)).type == pafs.FileType.Directory

    def size(self, rel: str) -> int:
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(self.uri(rel))
        return int(info.size or 0)

    def mtime(self, rel: str) -> float | None:
        """Last-modified time (epoch seconds), or None if the file is absent."""
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return info.mtime.timestamp()

    def move(self, src: str, dst: str) -> None:
        """Rename `src` to `dst` (atomic locally; copy then delete on S3)."""
        source, target = self.full(src), self.full(dst)
        self._before_write(src, dst)
        if not self.is_s3:
            os.makedirs(os.path.dirname(target), exist_ok=True)
        self.fs.move(source, target)

    def read_bytes(self, rel: str) -> bytes:
        """The whole file; on S3 one GetObject (pyarrow's stream would HEAD first for the size)."""
        if self.is_s3:
            return _s3_get(self.bucket, self.key(rel), self.uri(rel))
        with self.fs.open_input_stream(self.full(rel)) as stream:
            return stream.read()

    def key(self, rel: str) -> str:
        """The S3 object key of `rel`."""
        return self.full(rel).split("/", 1)[1]

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write (overwriting) atomically: readers see the old or the new bytes."""
        target = self.full(rel)
        self._before_write(rel)
        if self.is_s3:
            _s3().put_object(Bucket=self.bucket, Key=self.key(rel), Body=data)  # one request, not a multipart upload
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, target)

    def create_if_absent(self, rel: str, data: bytes | Iterable[bytes], durable: bool = True) -> bool:
        """Create `rel` with `data` (bytes, or chunks written one by one) only if absent; True if this call
        created it.

        The file is complete or absent, never half-written: locally a temp file is
        hard-linked to the final name; on S3 a PutObject with `If-None-Match: *`.
        `durable` fsyncs the content locally first: wanted for decisions (completed
        instants, MDT logs), not for files recovery can do without (requested
        instants, markers). The new folder entry is durable only once the caller
        flushes the folder (`sync_dirs`), batched with the step's other entries.
        """
        target = self.full(rel)
        self._before_write(rel)
        if self.is_s3:  # one PutObject: the chunks joined (an object store has no create-if-absent append)
            return _s3_put_if_absent(self.bucket, self.key(rel), data if isinstance(data, bytes) else b"".join(data))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if isinstance(data, bytes) and not data:
            return _create_empty(target, durable)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as out:
                for chunk in [data] if isinstance(data, bytes) else data:  # chunks may fail: no tmp is left
                    out.write(chunk)
                if durable:
                    out.flush()
                    os.fsync(out.fileno())
            os.link(tmp, target)
            return True
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def sync_file(self, rel: str) -> None:
        """Flush a written file to disk (locally), so a completed instant naming it survives a power loss.

        On S3 a finished PUT is already durable.
        """
        if self.is_s3:
            return
        fd = os.open(self.full(rel), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync_dirs(self, rels: Iterable[str]) -> None:
        """Flush each distinct folder's entries (locally): a link, rename or create is not durable until then.

        Callers batch every folder one step depends on, so each is flushed once, not once per file.
        """
        if self.is_s3:
            return
        for folder in sorted({self.full(rel) for rel in rels}):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def create_dirs(self, rels: Iterable[str]) -> None:
        """Create folders (and missing parents) whose entries survive a power loss once this returns.

        Every parent up to the base is flushed, once each: the folder may have been
        made by a writer that died before flushing, and nothing else will.
        """
        if self.is_s3:
            return
        parents = set()
        for rel in rels:
            norm = normalize_relative(rel)
            os.makedirs(self.full(norm), exist_ok=True)
            while norm:
                norm = posixpath.dirname(norm)
                parents.add(norm)
        self.sync_dirs(parents)

    def delete(self, rel: str) -> bool:
        """Delete a file; False if it was already gone (idempotent). On S3 a HEAD tells which (two requests):
        callers that do not need to know use `discard`."""
        target = self.full(rel)
        self._before_write(rel)
        if self.is_s3:
            if not _s3_exists(self.bucket, self.key(rel)):
                return False
            _s3().delete_object(Bucket=self.bucket, Key=self.key(rel))
            return True
        try:
            self.fs.delete_file(target)
            return True
        except FileNotFoundError:
            return False
        except OSError as err:
            if "not found" in str(err).lower() or "no such" in str(err).lower():
                return False
            raise

    def discard(self, rel: str) -> None:
        """Delete a file if present. On S3 one DeleteObject: pyarrow's delete would HEAD first and re-create
        the parent's folder marker after."""
        if not self.is_s3:
            self.delete(rel)
            return
        self._before_write(rel)
        _s3().delete_object(Bucket=self.bucket, Key=self.key(rel))

    def discard_all(self, rels: Iterable[str]) -> None:
        """Delete files if present; on S3 one `DeleteObjects` per 1,000 keys."""
        rels = list(rels)
        if not self.is_s3:
            for rel in rels:
                self.discard(rel)
            return
        self._before_write(*rels)
        _s3_delete_keys(self.bucket, [self.key(rel) for rel in rels])

    def delete_dir(self, rel: str) -> None:
        """Delete a folder and everything in it, if present.

        Tolerates a concurrent deleter: marker folders are removed by whichever
        of a writer, a rollback or a clean gets there first. On S3 one listing
        and one batched DeleteObjects per 1,000 objects, no folder markers left or made.
        """
        if self.is_s3:
            self._before_write(rel)
            _s3_delete_prefix(self.bucket, self.key(rel).rstrip("/") + "/")
            return
        if not self.exists(rel):
            return
        self._before_write(rel)
        try:
            self.fs.delete_dir(self.full(rel))
        except FileNotFoundError:
            return
        except OSError as exc:
            if "No such file" not in str(exc) and "NoSuchKey" not in str(exc):
                raise

    def makedirs(self, rel: str) -> None:
        target = self.full(rel)
        self._before_write(rel)
        self.fs.create_dir(target, recursive=True)

    def open_input(self, rel: str):
        return self.fs.open_input_file(self.full(rel))

    def open_output(self, rel: str):
        """A writable file; `tell()` before closing is its size. On S3 the bytes are buffered and stored by
        one PutObject when the `with` block ends without an error (never a partial object)."""
        target = self.full(rel)
        self._before_write(rel)
        if self.is_s3:
            return _S3Object(self.bucket, self.key(rel))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        return self.fs.open_output_stream(target)

    def list_dir(self, rel: str, sizes: bool = True) -> list[pafs.FileInfo] | list[LocalEntry]:
        """Direct children of a folder (empty if the folder is absent); symlinks are skipped.

        `sizes=False`: local files come without size and time (no stat per entry: a timeline
        listing needs names only); an S3 listing carries them anyway.
        """
        if not self.is_s3:
            return _scan(self.full(rel), sizes)
        selector = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=False)
        return self.fs.get_file_info(selector)

    def list_files(self, rel: str = "", recursive: bool = True) -> list[FileEntry]:
        """Files below a folder, as paths relative to the base.

        Locally the walk never follows a symlink: a link loop inside a table
        must not hang the listing or show files twice under phantom folders.
        """
        skip = len(self.root) + 1
        if not self.is_s3:
            return [FileEntry(path[skip:], size) for path, size in _local_walk(self.full(rel), recursive)]
        selector = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=recursive)
        return [
            FileEntry(info.path[skip:], int(info.size or 0))
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        ]


def _scan(folder: str, stat: bool = True) -> list[LocalEntry]:
    """The files (with size and mtime in ns) and folders directly in `folder`; without `stat`, files come
    with size 0 and no time (no system call per entry).

    Symlinks are not followed (nor listed); entries that vanish meanwhile are left out.
    """
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for entry in entries:  # DirEntry caches the type: no system call; a symlink is neither file nor folder here
        try:
            if entry.is_file(follow_symlinks=False):
                if not stat:
                    out.append(LocalEntry(entry.path, entry.name, _FILE, 0, None))
                    continue
                found = entry.stat(follow_symlinks=False)
                out.append(LocalEntry(entry.path, entry.name, _FILE, found.st_size, found.st_mtime_ns or None))
            elif entry.is_dir(follow_symlinks=False):
                out.append(LocalEntry(entry.path, entry.name, _DIRECTORY, None, None))
        except FileNotFoundError:
            continue
    return out


def _local_walk(folder: str, recursive: bool) -> list[tuple[str, int]]:
    """(path, size) of the files below `folder`, never through a symlink."""
    files = []
    pending = [folder]
    while pending:
        for entry in _scan(pending.pop()):
            if entry.type == _FILE:
                files.append((entry.path, entry.size))
            elif recursive:
                pending.append(entry.path)
    return files


def _s3_filesystem() -> pafs.S3FileSystem:
    endpoint = s3_endpoint()
    kwargs: dict = {"region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc or parsed.path
        kwargs["scheme"] = parsed.scheme or "https"
    return pafs.S3FileSystem(**kwargs)


_s3_client = None


def _s3():
    """The process's boto3 S3 client (created on first use, for the endpoint of that moment)."""
    global _s3_client
    import boto3

    if _s3_client is None:
        _s3_client = boto3.client("s3", endpoint_url=s3_endpoint())
    return _s3_client


def _s3_get(bucket: str, key: str, shown: str) -> bytes:
    from botocore.exceptions import ClientError

    try:
        return _s3().get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            raise FileNotFoundError(shown) from err
        raise


class _S3Object(io.BytesIO):
    """An object written in memory and stored by one PutObject on a clean exit (files here are small)."""

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__()
        self.bucket, self.key = bucket, key

    def __exit__(self, kind, value, trace) -> None:
        try:
            if kind is None:
                _s3().put_object(Bucket=self.bucket, Key=self.key, Body=self.getvalue())
        finally:
            self.close()


def _s3_exists(bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        _s3().head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return False
        raise


def _s3_delete_prefix(bucket: str, prefix: str) -> None:
    for page in _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        _s3_delete_keys(bucket, [item["Key"] for item in page.get("Contents", [])])


def _s3_delete_keys(bucket: str, keys: list[str]) -> None:
    for start in range(0, len(keys), 1000):
        batch = [{"Key": key} for key in keys[start : start + 1000]]
        _s3().delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


def _create_empty(target: str, durable: bool) -> bool:
    """An empty file is never half-written, so an exclusive create is the whole put-if-absent: one create
    instead of a temp file, a link and an unlink (a write makes one marker per file)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        return False
    try:
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _s3_put_if_absent(bucket: str, key: str, data: bytes) -> bool:
    return store_probe.put_if_absent(_s3(), bucket, key, data)
