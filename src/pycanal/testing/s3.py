"""A private, throw-away S3-compatible server for tests, benchmarks and the demo.

``PrivateS3`` runs S3Proxy (Apache-2.0) from the ``jar-with-dependencies`` that ``scripts/setup.sh``
copies out of Maven Central, with the machine's Java, on its ``filesystem`` store: objects are files
in a temporary directory, one loopback port, keys made up for each server. It is a real server
speaking the S3 protocol over HTTP, so clients are tested with the semantics the lake relies on:

* ``PutObject`` / ``CompleteMultipartUpload`` with ``If-None-Match: *`` publish the object with
  link(2), which fails when the key exists: of N concurrent conditional puts of one key exactly one
  gets 200, the rest 412 (``tests/test_s3_fixture.py`` races them).
* a listing made after a write returns the write (the store is the filesystem, no cache between).
* multipart uploads, ``If-Match`` (compared inside the one server process), V2 and V4 signatures.

SeaweedFS (``weed mini``) gave the same answers, but took a 14-minute build with 3.9 GB of Go
caches on a 2-core machine and listens on 13 ports, some of them fixed; S3Proxy is a 55 MB
download from Maven and one port.

    with PrivateS3() as s3:
        s3.create_bucket("lake")
        s3.endpoint_url                  # "http://127.0.0.1:<port>"
        s3.client()                      # a boto3 client (path-style)
        s3.storage_options()             # delta-rs / object_store
        s3.spark_options()               # spark.hadoop.fs.s3a.*
        s3.env()                         # AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, ...
        s3.restart(kill=True)            # same port and objects
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from ._process import PrivateServer, find_java

__all__ = ["S3PROXY_VERSION", "PrivateS3", "S3StartError", "s3proxy_home", "s3proxy_jar"]

S3PROXY_VERSION = "4.1.0"
"""The S3Proxy release that runs (``scripts/setup.sh`` reads it from here)."""

_READY_BUCKET = "pycanal-ready"


class S3StartError(RuntimeError):
    """The private S3 server could not be started or did not become ready."""


def s3proxy_home() -> Path:
    """Where ``setup.sh`` puts S3Proxy's jar: ``$PYCANAL_S3PROXY_HOME``, else
    ``~/.cache/pycanal/s3proxy-<version>``."""
    override = os.environ.get("PYCANAL_S3PROXY_HOME")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "pycanal" / f"s3proxy-{S3PROXY_VERSION}"


def s3proxy_jar() -> Path:
    """S3Proxy's self-contained jar; FileNotFoundError says how to get it."""
    jar = s3proxy_home() / f"s3proxy-{S3PROXY_VERSION}-jar-with-dependencies.jar"
    if not jar.is_file():
        raise FileNotFoundError(
            f"S3Proxy {S3PROXY_VERSION} is not at {jar}: run scripts/setup.sh (mvn copies it there) "
            "or point PYCANAL_S3PROXY_HOME at a directory holding it"
        )
    return jar


class PrivateS3(PrivateServer):
    """S3Proxy on its filesystem store in a temporary directory (see the module docstring).

    Parameters:
        region: the region clients sign for (S3Proxy takes any; clients need one).
        host: the address it listens on (another host's tests: the root namespace's address on a
            :class:`~pycanal.testing.netns.PrivateNetwork`).
        heap_mb: the JVM's ``-Xmx``.
        properties: more S3Proxy properties (last wins), e.g. ``{"s3proxy.max-single-part-object-size": 1 << 20}``.
        keep, startup_timeout, base_dir, die_with_parent: see
            :class:`~pycanal.testing._process.PrivateServer`.
    """

    name = "S3Proxy"
    dir_prefix = "s3"
    start_error = S3StartError

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        host: str = "127.0.0.1",
        heap_mb: int = 512,
        properties: dict[str, object] | None = None,
        keep: bool = False,
        startup_timeout: float = 60.0,
        base_dir: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            keep=keep, startup_timeout=startup_timeout, base_dir=base_dir, die_with_parent=die_with_parent
        )
        self.region = region
        self.host = host
        self.heap_mb = heap_mb
        self.properties = dict(properties or {})
        # S3Proxy compares the signature's key id and secret with these; anything printable will do.
        self.access_key = "pycanal" + secrets.token_hex(6)
        self.secret_key = secrets.token_urlsafe(30)
        self.data_dir: Path | None = None
        self.config_file: Path | None = None
        self.log_file: Path | None = None

    @property
    def endpoint_url(self) -> str:
        """The S3 endpoint (plain HTTP on loopback)."""
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------ what clients need
    def env(self) -> dict[str, str]:
        """The AWS SDKs' standard variables for this server (for a child process's environment), plus
        ``AWS_ALLOW_HTTP``, without which object_store (delta-rs) refuses a plain-HTTP endpoint."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def storage_options(self) -> dict[str, str]:
        """delta-rs's ``storage_options`` (object_store's S3 keys). delta-rs 1.6 commits a version
        with ``If-None-Match: *`` on any S3 store as long as ``AWS_S3_ALLOW_UNSAFE_RENAME`` is not
        set (that brings back copy-and-delete); ``conditional_put = etag`` lets object_store's
        overwrites carry ``If-Match`` too. Path-style addressing is object_store's default."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
            "AWS_CONDITIONAL_PUT": "etag",
        }

    def spark_options(self) -> dict[str, str]:
        """Spark's ``spark.hadoop.fs.s3a.*`` settings for this server: its endpoint over plain HTTP,
        path-style requests (no bucket host names on loopback), its keys only (no credential chain
        that would ask an instance metadata service). Add :func:`pycanal.spark.session.s3a_options`
        for the jars."""
        prefix = "spark.hadoop.fs.s3a."
        return {
            f"{prefix}endpoint": self.endpoint_url,
            f"{prefix}endpoint.region": self.region,
            f"{prefix}path.style.access": "true",
            f"{prefix}connection.ssl.enabled": "false",
            f"{prefix}access.key": self.access_key,
            f"{prefix}secret.key": self.secret_key,
            f"{prefix}aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        }

    def pyarrow_filesystem(self) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` on this server."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            endpoint_override=self.endpoint_url,
            scheme="http",
            force_virtual_addressing=False,
        )

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client on this server (path-style; ``config``: more ``botocore.config.Config``
        keys, e.g. ``max_pool_connections``)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(**{"s3": {"addressing_style": "path"}, **config}),
        )

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (an existing one of ours is fine)."""
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass

    def restart(self, kill: bool = False) -> None:
        """Stop the server (SIGTERM, or SIGKILL with ``kill=True``) and start it again on the same
        port and directory: buckets and objects survive."""
        self._restart(kill, lambda: self._launch_and_wait(append=True))

    # ------------------------------------------------------------------ internals
    def _start(self) -> None:
        assert self.root_dir is not None
        self.data_dir = self.root_dir / "data"
        self.data_dir.mkdir()
        self.config_file = self.root_dir / "s3proxy.properties"
        self.log_file = self.root_dir / "s3proxy.log"
        self._launch_on_free_port(self._launch_and_wait)

    def _log_files(self) -> list[Path]:
        return [p for p in (self.log_file,) if p is not None and p.exists()]

    def _write_config(self) -> None:
        assert self.config_file is not None and self.data_dir is not None
        props: dict[str, object] = {
            "s3proxy.endpoint": self.endpoint_url,
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": self.access_key,
            "s3proxy.credential": self.secret_key,
            "jclouds.provider": "filesystem",
            "jclouds.filesystem.basedir": self.data_dir,
        }
        props.update(self.properties)
        lines = [f"{key}={value}" for key, value in props.items()]
        self.config_file.write_text("# written by PrivateS3\n" + "\n".join(lines) + "\n")

    def _launch_and_wait(self, append: bool = False) -> None:
        """Write the properties for ``self.port``, start S3Proxy and wait until a bucket can be made
        and listed."""
        assert self.config_file is not None and self.log_file is not None and self.root_dir is not None
        self._write_config()
        command = [
            find_java(),
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start-up
            "-Xshare:auto",
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={self.root_dir}",
            "-jar",
            str(s3proxy_jar()),
            "--properties",
            str(self.config_file),
        ]
        self._launch(command, self.log_file, cwd=self.root_dir, append=append)
        self._wait(self._not_ready, interval=0.1)

    def _not_ready(self) -> str | None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex((self.host, self.port)) != 0:
                return f"accepted no connection on {self.endpoint_url}"
        from botocore.exceptions import BotoCoreError, ClientError

        client = self.client(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5)
        if str(self.properties.get("s3proxy.read-only-blobstore", "")).lower() == "true":
            try:  # a read-only store makes no bucket: listing them is its answer
                client.list_buckets()
            except (BotoCoreError, ClientError) as exc:
                return f"listed no buckets ({exc})"
            return None
        try:
            with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                client.create_bucket(Bucket=_READY_BUCKET)
            client.list_objects_v2(Bucket=_READY_BUCKET)
            client.delete_bucket(Bucket=_READY_BUCKET)
        except (BotoCoreError, ClientError) as exc:
            return f"made and listed no bucket ({exc})"
        return None

    def __repr__(self) -> str:
        return f"<PrivateS3 S3Proxy {S3PROXY_VERSION} {self._state} endpoint={self.endpoint_url}>"
