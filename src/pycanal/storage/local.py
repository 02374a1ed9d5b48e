"""A lake on a local (or mounted) disk: the os calls, no request per call, no copy. A whole
write is a temporary file renamed over the name, a create-once a temporary file hard-linked to
it (link(2) fails on an existing name, as delta-rs' local store does)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["LocalRoot"]


class LocalRoot:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalRoot)

    def __hash__(self) -> int:
        return 0

    def uri(self, key: str, scheme: str = "s3") -> str:
        return key

    def read(self, key: str) -> bytes:
        with open(key, "rb") as f:
            return f.read()

    def read_range(self, key: str, start: int, length: int) -> bytes:
        with open(key, "rb") as f:
            f.seek(start)
            return f.read(length)

    def modified_ms(self, key: str) -> int:
        return os.stat(key).st_mtime_ns // 1_000_000

    def write(self, key: str, data: bytes | memoryview) -> None:
        _publish(key, data, os.replace)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        try:
            _publish(key, data, os.link)  # link(2) fails on an existing name; rename would replace it
        except FileExistsError:
            return False
        return True

    def unlink(self, key: str) -> None:
        _remove(key)

    def exists(self, key: str) -> bool:
        return os.path.exists(key)

    def is_file(self, key: str) -> bool:
        return os.path.isfile(key)

    def listdir(self, key: str) -> list[str]:
        try:
            return os.listdir(key)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def mkdir(self, key: str) -> None:
        os.makedirs(key, exist_ok=True)

    def move(self, key: str, dest: str) -> None:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.rename(key, dest)

    def moving_to(self, key: str) -> str | None:
        return None

    # pyarrow is imported where files are read and written: a path names a lake in processes that
    # never touch its files (Spark's planners: pyarrow with numpy is 0.13 s of their start-up).
    def input_file(self, key: str) -> pa.NativeFile:
        import pyarrow as pa

        return pa.memory_map(key)

    @contextmanager
    def output_stream(self, key: str) -> Iterator[pa.NativeFile]:
        # Written in place, not renamed: a new file no one names until it is whole (a data file a
        # commit will name, a staged file its task reports), and a table write creates one for
        # every table a round touches (a temporary's extra open and rename cost the lake
        # benchmark ~5% of its apply time).
        import pyarrow as pa

        try:
            out = pa.OSFile(key, "wb")
        except FileNotFoundError:
            os.makedirs(os.path.dirname(key), exist_ok=True)  # as S3 needs no directory
            out = pa.OSFile(key, "wb")
        try:
            with out:
                yield out
        except BaseException:
            _remove(key)
            raise


def _create(path: str) -> Any:
    """``path`` opened for writing, its directory made where missing (an S3 key needs none)."""
    try:
        return open(path, "wb")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")


def _publish(key: str, data: bytes | memoryview, how: Callable[[str, str], None]) -> None:
    """``data`` written to a temporary file beside ``key``, then given the name by ``how``
    (``os.replace`` or ``os.link``); the temporary never stays."""
    tmp = _temporary(key)
    try:
        with _create(tmp) as f:
            f.write(data)
        how(tmp, key)
    finally:
        _remove(tmp)  # replaced: gone already; linked: the name stays


def _temporary(key: str) -> str:
    head, tail = os.path.split(key)
    return os.path.join(head, f".{tail}.{uuid.uuid4().hex}.tmp")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
