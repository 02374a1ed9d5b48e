"""A counting relay in front of an S3 server: what a lake on S3 asks of the store.

``bench/lake.py --s3`` points the pipeline's clients (Spark's s3a, obstore and delta-rs in the
driver and the executors) at this relay instead of the S3 server: each request is passed on
unchanged (the signatures, made for the relay's Host, still verify) and noted: its kind, the
answer's status, the body bytes each way, the time from sending it on to having the answer whole
(the server's time plus loopback, not the client's queueing), the client (by User-Agent) and the
lake's area it touched (the key's segment after ``--depth`` leading ones: ``current``,
``changelog``, ``_checkpoint``, ...).

It runs as a process of its own, not a thread of the bench: the bench's process is Spark's driver,
whose GIL the apply and the lag it measures share. ``GET /__s3count__?since=N`` answers the
totals of the requests from the N-th on, and ``n``, the number so far (what a later call's
``since`` takes); it is neither passed on nor counted.

    python bench/s3count.py --upstream http://127.0.0.1:PORT --port PORT [--depth 1]
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from urllib.request import urlopen

STATS = "/__s3count__"
_HOP_BY_HOP = ("transfer-encoding", "connection", "content-length")  # set again on the way back
_IDLE_S = 2.0  # an upstream connection idle longer is replaced, not reused (the server may close it)


def kind(method: str, path: str, headers: dict[str, str]) -> str:
    """The request's kind: GET, HEAD, LIST, DELETE, COPY, PUT, PUT_IF_NONE_MATCH, PUT_IF_MATCH,
    PUT_PART; POST_DELETE (many keys), POST_MULTIPART (a multipart upload's start or end)."""
    parts = urlsplit(path)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.lstrip("/").partition("/")[2]
    if method == "GET":
        return "LIST" if not key or "uploads" in query else "GET"
    if method == "PUT":
        if "x-amz-copy-source" in headers:
            return "COPY"
        if "partNumber" in query:
            return "PUT_PART"
        if "if-none-match" in headers:
            return "PUT_IF_NONE_MATCH"
        return "PUT_IF_MATCH" if "if-match" in headers else "PUT"
    if method == "POST":
        return "POST_DELETE" if "delete" in query else "POST_MULTIPART"
    return method


def area(path: str, depth: int) -> str:
    """The segment of the key (a LIST: of its prefix) after ``depth`` leading ones."""
    parts = urlsplit(path)
    key = parts.path.lstrip("/").partition("/")[2] or parse_qs(parts.query).get("prefix", [""])[0]
    segments = key.split("/")
    return segments[depth] if len(segments) > depth and segments[depth] else "(top)"


def client(user_agent: str) -> str:
    ua = user_agent.lower()
    if "hadoop" in ua or "aws-sdk-java" in ua:
        return "s3a"
    return "object_store" if "object_store" in ua else (ua.split("/", 1)[0] or "unknown")


class Records:
    """The requests so far: (kind, status, bytes in, bytes out, ms, client, area)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, int, float, str, str]] = []

    def summary(self, since: int) -> dict[str, Any]:
        total = len(self.rows)
        rows = self.rows[min(since, total) : total]
        by_kind: dict[str, dict[str, Any]] = {}
        for name in sorted({r[0] for r in rows}):
            mine = [r for r in rows if r[0] == name]
            ms = sorted(r[4] for r in mine)
            by_kind[name] = {
                "n": len(mine),
                "status": dict(sorted(Counter(str(r[1]) for r in mine).items())),
                "bytes_in": sum(r[2] for r in mine),
                "bytes_out": sum(r[3] for r in mine),
                "mean_ms": round(statistics.fmean(ms), 2),
                "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2),
            }
        return {
            "n": total,
            "requests": len(rows),
            "bytes_in": sum(r[2] for r in rows),
            "bytes_out": sum(r[3] for r in rows),
            "by_kind": by_kind,
            "by_client": dict(Counter(r[5] for r in rows).most_common()),
            "by_area": {
                name: {"n": n, **dict(Counter(r[0] for r in rows if r[6] == name).most_common())}
                for name, n in Counter(r[6] for r in rows).most_common()
            },
        }


def serve(upstream: str, port: int, depth: int) -> None:
    target = urlsplit(upstream)
    records = Records()

    class Relay(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # An answer's head and body are two writes: with Nagle's algorithm the body waits for the
        # client's delayed ACK of the head (40 ms on Linux), a delay S3 itself would not add.
        disable_nagle_algorithm = True
        conn: http.client.HTTPConnection | None = None
        used = 0.0

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))

        def _relay(self) -> None:
            if self.path.startswith(STATS):
                since = int(parse_qs(urlsplit(self.path).query).get("since", ["0"])[0])
                self._answer(
                    200,
                    "OK",
                    [("Content-Type", "application/json")],
                    json.dumps(records.summary(since)).encode(),
                )
                return
            body = self._body()
            headers = [(k, v) for k, v in self.headers.items() if k.lower() != "transfer-encoding"]
            if self.headers.get("Transfer-Encoding"):
                headers.append(("Content-Length", str(len(body))))
            if self.conn is None or time.monotonic() - self.used > _IDLE_S:
                if self.conn is not None:
                    self.conn.close()
                self.conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            started = time.perf_counter()
            try:
                self.conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for key, value in headers:
                    self.conn.putheader(key, value)
                self.conn.endheaders(body or None)
                answer = self.conn.getresponse()
                data = answer.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                raise
            ms = (time.perf_counter() - started) * 1000
            self.used = time.monotonic()
            lower = {k.lower(): v for k, v in headers}
            what = kind(self.command, self.path, lower)
            who = client(lower.get("user-agent", ""))
            records.rows.append((what, answer.status, len(body), len(data), ms, who, area(self.path, depth)))
            passed = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP]
            length = answer.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
            self._answer(answer.status, answer.reason, passed + [("Content-Length", length)], data)

        def _answer(self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response_only(status, reason)
            for key, value in headers:
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay

        def finish(self) -> None:
            super().finish()
            if self.conn is not None:
                self.conn.close()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Relay)
    server.daemon_threads = True
    server.serve_forever()


class S3Counter:
    """The relay started in a child process in front of ``upstream`` (an ``http://host:port``);
    ``summary(since)`` its totals (see the module docstring)."""

    def __init__(self, upstream: str, log: Path, depth: int = 1) -> None:
        from pycanal.testing._process import free_port, spawn

        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            __file__,
            "--upstream",
            upstream,
            "--port",
            str(self.port),
            "--depth",
            str(depth),
        ]
        self.process: subprocess.Popen[bytes] = spawn(command, log, death_signal=9)
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the S3 counting relay did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)

    def summary(self, since: int = 0) -> dict[str, Any]:
        with urlopen(f"{self.endpoint_url}{STATS}?since={since}", timeout=60) as answer:
            return json.loads(answer.read())

    def mark(self) -> int:
        """The number of requests so far: a later ``summary``'s ``since``."""
        return int(self.summary(1 << 62)["n"])

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def per_batch(summary: dict[str, Any], batches: int) -> dict[str, Any]:
    """``summary`` with the micro-batches it covers and its requests and bytes per micro-batch."""
    out = {"micro_batches": batches, **{k: v for k, v in summary.items() if k != "n"}}
    if batches > 0:
        out["requests_per_batch"] = round(summary["requests"] / batches, 1)
        out["bytes_in_per_batch"] = round(summary["bytes_in"] / batches)
        out["bytes_out_per_batch"] = round(summary["bytes_out"] / batches)
        for row in out["by_kind"].values():
            row["per_batch"] = round(row["n"] / batches, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="the S3 server, http://host:port")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--depth", type=int, default=1, help="key segments before the area counted")
    args = ap.parse_args()
    serve(args.upstream, args.port, args.depth)


if __name__ == "__main__":
    main()
