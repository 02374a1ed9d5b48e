"""One path type for a lake on a local disk or in an S3 bucket: ``lake_path("/data/lake")``,
``lake_path("s3://bucket/prefix")``, joined with ``/`` like a ``pathlib.Path``.

It has the few operations the lake's writers and readers use, each with the guarantee they need
on both kinds of store:

* create once (:meth:`LakePath.put_if_absent`, a Delta commit, a journal marker): locally a
  temporary file hard-linked to the name (link(2) fails on an existing name, as delta-rs' local
  store does); on S3 a ``PUT`` with ``If-None-Match: *``, which the store answers 412 when the key
  exists (AWS S3 since 2024-08, MinIO, S3Proxy). Never a rename: S3 has none.
* replace whole (:meth:`LakePath.write_bytes`, a pointer such as ``_last_checkpoint``): a
  temporary file renamed over the name; on S3 a plain ``PUT`` (an object is replaced atomically).
* read whole, list one level, delete; on S3 a directory is a key prefix, there without objects.
* move a directory (:meth:`LakePath.move_to`, a renamed or dropped table): locally one rename(2);
  on S3 every object copied, then deleted, under a marker in the source that names the
  destination, so a move cut short is finished by the next one (:meth:`LakePath.moving_to`) and
  nothing is deleted before its copy exists. A reader of the destination may meanwhile see part
  of it.

S3 goes through obstore, the Python binding of the Rust ``object_store`` crate that delta-rs writes
the same tables with, so both writers see one client's semantics. Its settings are the usual AWS
ones, read from the environment by obstore, delta-rs and Spark's s3a alike (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``), or given as ``options`` with the same names. A secret is never in a
``repr``, an error or a log line (:func:`mask`). Local paths keep the os calls they had: no request
per call, no copy.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pycanal.common.files import write_atomically

from .errors import StorageError, mask
from .local import LocalRoot
from .s3 import S3Root

if TYPE_CHECKING:  # pyarrow is imported by what reads and writes files (see .local)
    import pyarrow as pa

__all__ = ["LakePath", "StorageError", "lake_path", "mask"]


def lake_path(where: str | os.PathLike[str] | LakePath, options: Mapping[str, str] | None = None) -> LakePath:
    """The lake at ``where``: ``s3://bucket[/prefix]`` (``s3a://`` too), ``file:///path`` or a path
    (made absolute). ValueError names what is wrong with it."""
    if isinstance(where, LakePath):
        return where
    text = os.fspath(where)
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme in ("s3", "s3a"):
        parts = urlsplit(text)
        if not parts.netloc:
            raise ValueError(f"{text!r}: no bucket (s3://bucket/prefix)")
        if "@" in parts.netloc:
            raise ValueError(f"s3://{parts.hostname}/...: credentials go in AWS_* settings, not in the URI")
        prefix = parts.path.strip("/")
        return LakePath(S3Root(parts.netloc, dict(options or {})), prefix)
    if scheme == "file":
        text = urlsplit(text).path
    elif scheme:
        raise ValueError(f"{text!r}: a lake is a local path, file:// or s3:// (not {scheme}://)")
    return LakePath(LocalRoot(), os.path.abspath(text))  # no symlinks resolved: no syscall


class LakePath:
    """A file or directory of a lake; see the module docstring. Equal paths compare and hash equal."""

    __slots__ = ("_root", "key")

    def __init__(self, root: LocalRoot | S3Root, key: str) -> None:
        self._root = root
        self.key = key  # local: an absolute path; S3: the object key ("" for the bucket)

    # ---------------------------------------------------------------- naming
    def __truediv__(self, name: str | os.PathLike[str]) -> LakePath:
        name = os.fspath(name)
        return LakePath(self._root, posixpath.join(self.key, name) if self.key else name)

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    @property
    def parent(self) -> LakePath:
        return LakePath(self._root, posixpath.dirname(self.key))

    @property
    def is_local(self) -> bool:
        return isinstance(self._root, LocalRoot)

    @property
    def local(self) -> Path:
        """The local path; ValueError on an object store (where a caller needs a local file)."""
        if not self.is_local:
            raise ValueError(f"{self.uri}: not a local path")
        return Path(self.key)

    @property
    def uri(self) -> str:
        """The path as delta-rs, pyarrow and users name it: ``s3://bucket/key`` or a local path."""
        return self._root.uri(self.key)

    @property
    def spark_uri(self) -> str:
        """The path as Spark's Hadoop file systems name it: ``s3a://bucket/key`` or a local path."""
        return self._root.uri(self.key, "s3a")

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs' ``storage_options`` for this lake (the options given; the rest from the environment)."""
        return dict(self._root.options) if isinstance(self._root, S3Root) else {}

    def relative_to(self, other: LakePath) -> str:
        base = other.key.rstrip("/")
        if self._root != other._root or not (self.key == base or self.key.startswith(base + "/")):
            raise ValueError(f"{self.uri} is not under {other.uri}")
        return self.key[len(base) + 1 :] if base else self.key

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        """A local path, for ``open``, ``os`` and pyarrow; TypeError on S3 (not a file of this host)."""
        if not self.is_local:
            raise TypeError(f"{self.uri} is not a local path: read it through LakePath")
        return self.key

    def __repr__(self) -> str:
        return f"LakePath({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LakePath) and self._root == other._root and self.key == other.key

    def __hash__(self) -> int:
        return hash((self._root, self.key))

    # ---------------------------------------------------------------- files
    def read_bytes(self) -> bytes:
        """The file's bytes; FileNotFoundError where there is none."""
        return self._root.read(self.key)

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def read_range(self, start: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``start`` (fewer at the end of the file)."""
        return self._root.read_range(self.key, start, length)

    def modified_ms(self) -> int:
        """When the file was last written (ms since the epoch); FileNotFoundError where there is none."""
        return self._root.modified_ms(self.key)

    def write_bytes(self, data: bytes | memoryview, *, sync: bool = False) -> None:
        """Replace the file with ``data`` whole: a reader sees the old bytes or the new.
        ``sync``: durable once this returns (a journal's record); on S3 every write is."""
        if sync and isinstance(self._root, LocalRoot):
            write_atomically(self.key, data)
        else:
            self._root.write(self.key, data)

    def write_text(self, text: str, *, sync: bool = False) -> None:
        self.write_bytes(text.encode(), sync=sync)

    def put_if_absent(self, data: bytes) -> bool:
        """Create the file with ``data`` unless it exists (False then, nothing changed)."""
        return self._root.put_if_absent(self.key, data)

    def unlink(self) -> None:
        """Remove the file if it is there."""
        self._root.unlink(self.key)

    def exists(self) -> bool:
        """A file, or a directory (on S3: a prefix with objects under it)."""
        return self._root.exists(self.key)

    def is_file(self) -> bool:
        return self._root.is_file(self.key)

    def listdir(self) -> list[str]:
        """The names of the files and directories right under this one ([] where there is none)."""
        return self._root.listdir(self.key)

    def mkdir(self) -> None:
        """Make the directory and its parents where the store has directories (not S3)."""
        self._root.mkdir(self.key)

    def move_to(self, dest: LakePath) -> None:
        """Move this directory to ``dest`` (which must not exist, or be this move's unfinished
        destination; see the module docstring)."""
        if dest._root != self._root:
            raise ValueError(f"{self.uri} -> {dest.uri}: not in one store")
        self._root.move(self.key, dest.key)

    def moving_to(self) -> LakePath | None:
        """Where an unfinished move of this directory goes (S3; a local move cannot be cut short)."""
        key = self._root.moving_to(self.key)
        return None if key is None else LakePath(self._root, key)

    def input_file(self) -> pa.NativeFile:
        """The file for pyarrow's readers (Parquet, Arrow IPC): memory-mapped, or read whole from S3."""
        return self._root.input_file(self.key)

    @contextmanager
    def output_stream(self) -> Iterator[pa.NativeFile]:
        """A stream for pyarrow's writers, for a new file that nothing names until it is whole (a
        data file a commit will name, a staged file): an error removes what was written. On S3
        nothing appears before the block ends; locally a process killed meanwhile may leave part
        of it, which nothing names (the vacuum removes a table's)."""
        with self._root.output_stream(self.key) as out:
            yield out
