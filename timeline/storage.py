"""One small storage interface over `pyarrow.fs`, plus create-if-absent.

Every path a caller passes is relative to the table base; a path that would
leave the base is refused, so no bug or bad input can touch files elsewhere.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow.fs as pafs

from timeline.errors import BadInputError, PathEscapeError


@dataclass(frozen=True)
class FileEntry:
    """A file below the table base: its relative path and size in bytes."""

    path: str
    size: int


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
        if not self.is_s3:
            os.makedirs(os.path.dirname(self.full(dst)), exist_ok=True)
        self.fs.move(self.full(src), self.full(dst))

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.full(rel)) as stream:
            return stream.read()

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write (overwriting) atomically: readers see the old or the new bytes."""
        target = self.full(rel)
        if self.is_s3:
            with self.fs.open_output_stream(target) as out:
                out.write(data)
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, target)

    def create_if_absent(self, rel: str, data: bytes, durable: bool = True) -> bool:
        """Create `rel` with `data` only if absent; True if this call created it.

        The file is complete or absent, never half-written: locally a temp file is
        hard-linked to the final name; on S3 a PutObject with `If-None-Match: *`.
        `durable` fsyncs locally first: wanted for decisions (completed instants,
        MDT logs), not for files recovery can do without (requested instants, markers).
        """
        target = self.full(rel)
        if self.is_s3:
            return _s3_put_if_absent(self.bucket, target.split("/", 1)[1], data)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as out:
            out.write(data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        try:
            os.link(tmp, target)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def delete(self, rel: str) -> bool:
        """Delete a file; False if it was already gone (idempotent)."""
        try:
            self.fs.delete_file(self.full(rel))
            return True
        except FileNotFoundError:
            return False
        except OSError as err:
            if "not found" in str(err).lower() or "no such" in str(err).lower():
                return False
            raise

    def delete_dir(self, rel: str) -> None:
        """Delete a folder and everything in it, if present.

        Tolerates a concurrent deleter: marker folders are removed by whichever
        of a writer, a rollback or a clean gets there first.
        """
        if not self.exists(rel):
            return
        try:
            self.fs.delete_dir(self.full(rel))
        except FileNotFoundError:
            return
        except OSError as exc:
            if "No such file" not in str(exc) and "NoSuchKey" not in str(exc):
                raise

    def makedirs(self, rel: str) -> None:
        self.fs.create_dir(self.full(rel), recursive=True)

    def open_input(self, rel: str):
        return self.fs.open_input_file(self.full(rel))

    def open_output(self, rel: str):
        target = self.full(rel)
        if not self.is_s3:
            os.makedirs(os.path.dirname(target), exist_ok=True)
        return self.fs.open_output_stream(target)

    def list_dir(self, rel: str) -> list[pafs.FileInfo]:
        """Direct children of a folder (empty if the folder is absent); symlinks are skipped."""
        if not self.is_s3:
            return _local_children(self.full(rel))
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


def _scan(folder: str) -> Iterator[tuple[str, int | None]]:
    """(path, size) of each file and (path, None) of each folder directly in `folder`.

    Symlinks are not followed (nor listed); entries that vanish meanwhile are left out.
    """
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                yield entry.path, None
            elif entry.is_file(follow_symlinks=False):
                yield entry.path, entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            continue


def _local_children(folder: str) -> list[pafs.FileInfo]:
    """`_scan` as pyarrow FileInfos, the type `list_dir` returns on S3 too."""
    out = []
    for path, size in _scan(folder):
        kind = pafs.FileType.Directory if size is None else pafs.FileType.File
        out.append(pafs.FileInfo(path, kind, size=size))
    return out


def _local_walk(folder: str, recursive: bool) -> list[tuple[str, int]]:
    """(path, size) of the files below `folder`, never through a symlink."""
    files = []
    pending = [folder]
    while pending:
        for path, size in _scan(pending.pop()):
            if size is not None:
                files.append((path, size))
            elif recursive:
                pending.append(path)
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


def _s3_put_if_absent(bucket: str, key: str, data: bytes) -> bool:
    global _s3_client
    import boto3
    from botocore.exceptions import ClientError

    if _s3_client is None:
        _s3_client = boto3.client("s3", endpoint_url=s3_endpoint())
    try:
        _s3_client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
            return False
        raise
