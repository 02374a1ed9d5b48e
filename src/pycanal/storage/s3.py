"""A lake in an S3 bucket through obstore (the Python side of the Rust ``object_store`` that
delta-rs writes the same tables with): create-once is a ``PUT`` with ``If-None-Match: *``, a whole
write a plain ``PUT``, a directory a key prefix, a move every object copied and then deleted
under a marker that names the destination (see ``LakePath.move_to``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import StorageError, mask

if TYPE_CHECKING:  # imported where files are read and written (see .local)
    import pyarrow as pa

__all__ = ["S3Root"]

T = TypeVar("T")

# obstore reads these from the environment itself; given as options they are passed through.
_CLIENT_KEYS = {"AWS_ALLOW_HTTP": "allow_http"}
_IMDS = "169.254.169.254"  # EC2's instance metadata, where a client without keys asks for some
_MOVING = "_pycanal_moving_to"  # an S3 directory's unfinished move: the destination's key


class S3Root:
    """A bucket; ``options`` as given (AWS_* names), the rest from the environment."""

    def __init__(self, bucket: str, options: dict[str, str]) -> None:
        self.bucket = bucket
        self.options = options

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3Root) and (self.bucket, self.options) == (other.bucket, other.options)

    def __hash__(self) -> int:
        return hash(self.bucket)

    def __reduce__(self) -> tuple[Any, ...]:  # the client is made anew in each process
        return (S3Root, (self.bucket, self.options))

    def uri(self, key: str, scheme: str = "s3") -> str:
        return f"{scheme}://{self.bucket}/{key}" if key else f"{scheme}://{self.bucket}"

    @property
    def store(self) -> Any:
        # the AWS_* environment is part of the key: a client made before it changed (another
        # endpoint or keys in the same process) is not the one to use after
        aws = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))
        return _s3_store(self.bucket, tuple(sorted(self.options.items())), aws)

    def _call(self, key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One request; a failure but a missing key becomes a StorageError naming the URI."""
        import obstore.exceptions as errors

        try:
            return fn(self.store, *args, **kwargs)
        except FileNotFoundError as exc:
            if "NoSuchBucket" in str(exc):  # not a missing key: every request would fail
                raise StorageError(f"{self.uri(key)}: bucket {self.bucket!r} does not exist") from None
            raise
        except errors.AlreadyExistsError:
            raise
        except (errors.BaseError, OSError, ValueError) as exc:
            reason = _reason(exc, self.options)
            if _IMDS in reason and not self._has_keys():  # the client's last resort, asked for keys
                reason = (
                    "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or run where a "
                    f"web identity or an instance profile gives them); asking {_IMDS} said: {reason}"
                )
            raise StorageError(f"{self.uri(key)}: {reason}") from None

    def _has_keys(self) -> bool:
        given = {k.upper() for k in self.options}
        return "AWS_ACCESS_KEY_ID" in given or bool(os.environ.get("AWS_ACCESS_KEY_ID"))

    def read(self, key: str) -> bytes:
        import obstore

        return bytes(self._call(key, lambda s: obstore.get(s, key).bytes()))

    def read_range(self, key: str, start: int, length: int) -> bytes:
        import obstore

        if length <= 0:
            return b""
        try:  # one request: S3 answers a range running past the end with the bytes there are
            return bytes(self._call(key, obstore.get_range, key, start=start, end=start + length))
        except StorageError as exc:
            # 416, InvalidRange: the object ends at or before ``start`` (the status's words, not
            # its number, which a key like part-00416 holds too)
            if "Range Not Satisfiable" in str(exc):
                return b""
            raise

    def modified_ms(self, key: str) -> int:
        import obstore

        return int(self._call(key, obstore.head, key)["last_modified"].timestamp() * 1000)

    def _get_buffer(self, key: str) -> pa.Buffer:
        import obstore
        import pyarrow as pa

        return pa.py_buffer(self._call(key, lambda s: obstore.get(s, key).bytes()))

    def write(self, key: str, data: bytes | memoryview) -> None:
        import obstore

        self._call(key, obstore.put, key, bytes(data) if isinstance(data, memoryview) else data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        import obstore
        import obstore.exceptions as errors

        try:
            self._call(key, obstore.put, key, data, mode="create")
        except errors.AlreadyExistsError:
            return False
        return True

    def unlink(self, key: str) -> None:
        import obstore

        try:
            self._call(key, obstore.delete, key)
        except FileNotFoundError:
            pass

    def is_file(self, key: str) -> bool:
        import obstore

        if not key:
            return False
        try:
            self._call(key, obstore.head, key)
        except FileNotFoundError:
            return False
        return True

    def exists(self, key: str) -> bool:
        return self.is_file(key) or bool(self.listdir(key))

    def listdir(self, key: str) -> list[str]:
        import obstore

        prefix = key.rstrip("/") + "/" if key else None
        found = self._call(key, obstore.list_with_delimiter, prefix)
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"]]
        return names + [o["path"].rsplit("/", 1)[-1] for o in found["objects"]]

    def mkdir(self, key: str) -> None:
        return None  # a prefix exists once an object is under it

    def move(self, key: str, dest: str) -> None:
        import obstore

        marker = f"{key}/{_MOVING}"
        self.write(marker, dest.encode())
        names = [
            o["path"]
            for o in self._call(key, lambda s: obstore.list(s, key + "/").collect())
            if o["path"] != marker
        ]
        for name in names:  # every copy before any delete: the source stays whole until then
            self._call(name, obstore.copy, name, dest + name[len(key) :])
        for name in names:
            self.unlink(name)
        self.unlink(marker)

    def moving_to(self, key: str) -> str | None:
        try:
            return self.read(f"{key}/{_MOVING}").decode()
        except FileNotFoundError:
            return None

    def input_file(self, key: str) -> pa.NativeFile:
        import pyarrow as pa

        return pa.BufferReader(self._get_buffer(key))

    @contextmanager
    def output_stream(self, key: str) -> Iterator[pa.NativeFile]:
        import pyarrow as pa

        out = pa.BufferOutputStream()
        yield out
        self.write(key, out.getvalue().to_pybytes())


@functools.lru_cache(maxsize=64)
def _s3_store(
    bucket: str, options: tuple[tuple[str, str], ...], environment: tuple[tuple[str, str], ...]
) -> Any:
    """One client per bucket, options and AWS environment in a process (its connection pool is
    reused); obstore reads the ``environment`` itself."""
    from obstore.store import S3Store

    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    for key, value in options:
        upper = key.upper()
        if upper in _CLIENT_KEYS:
            client[_CLIENT_KEYS[upper]] = value.lower() == "true"
        elif upper.startswith("AWS_"):
            config[upper.lower()] = value
    endpoint = (
        config.get("aws_endpoint_url") or config.get("aws_endpoint") or os.environ.get("AWS_ENDPOINT_URL", "")
    )
    if "allow_http" not in client and endpoint.startswith("http://"):
        client["allow_http"] = True  # an http:// endpoint is plain HTTP by choice
    return S3Store(bucket, config=config, client_options=client)


def _reason(exc: BaseException, options: Mapping[str, str]) -> str:
    """The first line of a store's error, secrets masked."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return mask(text, options)
