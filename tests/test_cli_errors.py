"""Every command with a wrong value for each option that takes a path, an address, a number, a
regex or a name, run as a user runs it (a subprocess): a non-zero exit, nothing on stdout, one
line on stderr naming the option (or file) and the value, a password never shown, and nothing
left behind in the working directory or next to the paths given. A pipeline refuses its options
with pyspark not importable: before anything of Spark is loaded."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from binlog_fixtures import FIXTURES_DIR
from pycanal.spark.canal_options import SIGNALS_MARK
from pycanal.testing._process import free_port

FIXTURES = FIXTURES_DIR
GOOD = str(FIXTURES / "binlog-parser" / "mysql-bin.01")
TRUNCATED = str(FIXTURES / "rust_mysql_common" / "binlog_truncated_prev_gtid_event.000001")
SECRET = "s3cr3t-pw"

LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING) ")

# A closed port: nothing listens on it while the suite runs.
REFUSED = "127.0.0.1:1"
# A pipeline with a snapshot source: every snapshot option applies.
SNAPSHOT = [
    "pipeline",
    "--lake",
    "{tmp}/lake",
    "--address",
    REFUSED,
    "--source",
    REFUSED,
    "--filter",
    "shop\\..*",
]

# (command line, text the one line contains, exit code); {tmp} is the test's own directory.
CASES: list[tuple[list[str], str, int]] = [
    # binlog decode: files and positions
    (["binlog", "decode", "{tmp}/missing.bin"], "binlog file '{tmp}/missing.bin': no such file", 2),
    (["binlog", "decode", "{tmp}"], "binlog file '{tmp}': not a file", 2),
    (["binlog", "decode", GOOD, "--start-position", "2"], "--start-position 2: must be at least 4", 2),
    (
        ["binlog", "decode", GOOD, "--start-position", "x1"],
        "--start-position 'x1': 'x1' is not a valid int",
        2,
    ),
    (["binlog", "decode", GOOD, "--start-position", "121"], "offset 121: start position 121 is not at", 2),
    (["binlog", "decode", GOOD, "--stop-position", "10"], "positions 4 to 10 hold no row change", 2),
    (["binlog", "decode", GOOD, "--start-position", "400", "--stop-position", "300"], "the range selects", 2),
    (["binlog", "decode", GOOD, "--format", "xml"], "--format 'xml'", 2),
    (["binlog", "decode", GOOD, "--workers", "-1"], "--workers -1: must be at least 0", 2),
    (["binlog", "decode", GOOD, "--workers", "2"], "--workers 2: only --format jsonl of whole files", 2),
    (
        ["binlog", "decode", GOOD, "--format", "jsonl", "--workers", "2", "--start-position", "120"],
        "--workers 2: only --format jsonl of whole files",
        2,
    ),
    (
        ["binlog", "decode", TRUNCATED],
        "binlog_truncated_prev_gtid_event.000001, offset 120: truncated event header",
        2,
    ),
    # dump: the source, the start, the filters
    (["dump", "--source", "db:port"], "--source 'db:port': expected HOST:PORT", 2),
    (["dump", "--source", "db:70000"], "--source 'db:70000': expected HOST:PORT", 2),
    (["dump", "--source", REFUSED, "--password", SECRET], f"{REFUSED}: ", 1),
    (
        ["dump", "--source", REFUSED, "--start", "mysql-bin.000001"],
        "--start 'mysql-bin.000001': expected FILE:POS",
        2,
    ),
    (
        ["dump", "--source", REFUSED, "--start", "f:2"],
        "--start 'f:2': expected FILE:POS with POS at least 4",
        2,
    ),
    (["dump", "--source", REFUSED, "--gtid", "garbage"], "--gtid 'garbage': expected a MySQL", 2),
    (["dump", "--source", REFUSED, "--timestamp", "-5"], "--timestamp -5: must be at least 0", 2),
    (
        ["dump", "--source", REFUSED, "--filter", "shop\\.(orders"],
        "--filter 'shop\\\\.(orders': bad filter",
        2,
    ),
    (["dump", "--source", REFUSED, "--black-filter", "["], "--black-filter '[': bad filter", 2),
    (["dump", "--source", REFUSED, "--server-id", "0"], "--server-id 0: must be at least 1", 2),
    (["dump", "--source", REFUSED, "--server-id", "4294967296"], "--server-id 4294967296: must be below", 2),
    (
        ["dump", "--source", REFUSED, "--history", "{tmp}/no/h.db"],
        "--history '{tmp}/no/h.db': no directory",
        2,
    ),
    (["dump", "--source", REFUSED, "--start", "f:4", "--gtid", "0-1-1"], "give at most one of --start", 2),
    # server: the conf dir and its keys
    (["server", "--conf", "{tmp}/missing"], "--conf '{tmp}/missing': no such directory", 2),
    (["server", "--conf", "{tmp}/file"], "--conf '{tmp}/file': not a directory", 2),
    (["server", "--conf", "{tmp}"], "--conf '{tmp}': no canal.properties in it", 2),
    (["server", "--conf", "{tmp}/badport"], "canal.port='eleven': ", 1),
    (["server", "--conf", "{tmp}/conf", "--log-level", "LOUD"], "--log-level 'LOUD': must be one of", 2),
    (["server", "--conf", "{tmp}/conf", "--zk-session-timeout", "0"], "--zk-session-timeout 0.0: must be", 2),
    (["server", "--conf", "{tmp}/busy-tcp"], "canal.port = {busy}: cannot listen on 127.0.0.1:{busy}", 1),
    (["server", "--conf", "{tmp}/busy-metrics"], "canal.metrics.pull.port = {busy}: cannot listen", 1),
    # tail: the server, the destination, the numbers
    (
        ["tail", "--address", "localhost", "--destination", "d"],
        "--address 'localhost': expected HOST:PORT",
        2,
    ),
    (["tail", "--address", REFUSED, "--destination", ""], "--destination '': give the destination", 2),
    (
        ["tail", "--address", REFUSED, "--destination", "d", "--password", SECRET],
        f"{REFUSED} destination d: ",
        1,
    ),
    (["tail", "--address", REFUSED, "--destination", "d", "--filter", "("], "--filter '(': bad filter", 2),
    (["tail", "--address", REFUSED, "--destination", "d", "--client-id", "0"], "--client-id 0: must be", 2),
    (["tail", "--address", REFUSED, "--destination", "d", "--batch-size", "0"], "--batch-size 0: must be", 2),
    (
        ["tail", "--address", REFUSED, "--destination", "d", "--batch-size", "ten"],
        "--batch-size 'ten': 'ten' is not a valid int",
        2,
    ),
    (
        ["tail", "--address", REFUSED, "--destination", "d", "--limit", "-1"],
        "--limit -1: must be at least 1",
        2,
    ),
    # pipeline: everything checked before Spark starts and before the lake is made
    (
        ["pipeline", "--lake", "{tmp}/lake"],
        "give one of --address HOST:PORT, --zk-servers HOST:PORT[,...] and --kafka",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--kafka", "k"],
        "--kafka 'k': expected HOST:PORT[,HOST:PORT...]",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--kafka", REFUSED], "--kafka: give one of --topic", 2),
    (["pipeline", "--lake", "{tmp}/lake", "--topic", "t"], "--topic: needs --kafka HOST:PORT", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--kafka", REFUSED, "--topic", "a/b"],
        "--topic 'a/b': a topic name",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--kafka", REFUSED, "--topic-pattern", "a("],
        "--topic-pattern 'a(': not a regex",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--kafka", REFUSED, "--topic", "t", "--address", REFUSED],
        "--address: a server's option: --kafka reads Canal's topics instead",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--kafka", REFUSED, "--topic", "t", "--snapshot", "initial"],
        "--snapshot: a server's option",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", "nohostport"], "--address 'nohostport': expected", 2),
    (["pipeline", "--lake", "{tmp}/lake", "--zk-servers", "zk"], "--zk-servers 'zk': expected HOST:PORT", 2),
    (["pipeline", "--lake", "/proc/x/lake", "--address", REFUSED], "--lake '/proc/x/lake': No such file", 2),
    (
        ["pipeline", "--lake", "{tmp}/file/lake", "--address", REFUSED],
        "--lake '{tmp}/file/lake': Not a dir",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--destination", ""], "--destination ''", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--client-id", "40000"],
        "--client-id 40000",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--filter", "a(b"], "--filter 'a(b': bad", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--master", "spark:/m"],
        "--master 'spark:/m'",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--trigger", "soon"], "--trigger 'soon'", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--apply-threads", "0"],
        "--apply-threads 0",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--apply-on", "gpu"], "--apply-on 'gpu'", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--apply-share", "2"],
        "--apply-share 2.0",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--cache-mb", "-1"], "--cache-mb -1", 2),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--progress", "-1"], "--progress -1.0", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--stall-timeout", "-5"],
        "--stall-timeout -5.0",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot", "now"], "--snapshot 'now'", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot", "initial"],
        "needs --source",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--source", "db"],
        "--source 'db': expected",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--source", REFUSED],
        f"--source '{REFUSED}': needs --filter",
        2,
    ),
    (
        [
            "pipeline",
            "--lake",
            "{tmp}/lake",
            "--address",
            REFUSED,
            "--snapshot",
            "initial",
            "--source",
            REFUSED,
        ],
        "needs --filter: the tables a snapshot may read",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot-chunk-rows", "0"],
        "--snapshot-chunk-rows 0: must be from 1 to 2147483647",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot-parallelism", "0"],
        "--snapshot-parallelism 0: must be from 1 to 2147483647",
        2,
    ),
    (
        [*SNAPSHOT, "--snapshot-parallelism", "2147483648"],
        "--snapshot-parallelism 2147483648: must be from 1 to 2147483647",
        2,
    ),
    (
        [*SNAPSHOT, "--snapshot-server-ids", "7-8"],
        "--snapshot-server-ids '7-8': 2 ids, fewer than --snapshot-parallelism (4)",
        2,
    ),
    (
        [*SNAPSHOT, "--snapshot-parallelism", "1001"],
        "--snapshot-server-ids '5400-6399': 1000 ids, fewer than --snapshot-parallelism (1001)",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot-chunk-rows", "10"],
        "--snapshot-chunk-rows: needs --source",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--source-password", SECRET],
        "--source-password: needs --source",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot-reader", "jdbc"],
        "--snapshot-reader 'jdbc': must be one of connectorx, pymysql",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--snapshot-server-ids", "9-1"],
        "--snapshot-server-ids '9-1': expected LOW-HIGH",
        2,
    ),
    ([*SNAPSHOT, "--source-ssl-mode", "maybe"], "--source-ssl-mode 'maybe': must be one of DISABLED,", 2),
    ([*SNAPSHOT, "--source-ssl-ca", "{tmp}/none.pem"], "--source-ssl-ca '", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--source-ssl-mode", "REQUIRED"],
        "--source-ssl-mode: needs --source",
        2,
    ),
    (["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--trigger", "1 s"], "--trigger '1 s'", 2),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--trigger", "2 min"],
        "--trigger '2 min'",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--trigger", "1.5 minutes"],
        "--trigger '1.5 minutes'",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--master", "local[0]"],
        "--master 'local[0]': local[N] runs N threads",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--master", "mesos://m:5050"],
        "--master 'mesos://m:5050': expected a Spark master URL",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--master", "spark://m:70000"],
        "--master 'spark://m:70000': a port from 1 to 65535",
        2,
    ),
    (  # the driver's address is the one on the route to the master: none, no address to give
        [
            "pipeline",
            "--lake",
            "{tmp}/lake",
            "--address",
            REFUSED,
            "--master",
            "spark://no-such.invalid:7077",
        ],
        "--master 'spark://no-such.invalid:7077': no route from this host to the master no-such.invalid:7077",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--master", "yarn"],
        "--master 'yarn': needs HADOOP_CONF_DIR or YARN_CONF_DIR",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--driver-java-options", "-Xmx4g"],
        "--driver-java-options '-Xmx4g': Spark refuses -Xmx4g",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--driver-java-options", "Xss4m"],
        "--driver-java-options 'Xss4m': 'Xss4m' is not a JVM flag",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--driver-java-options", "-Dx='a b"],
        "no closing quotation",
        2,
    ),
    (
        ["pipeline", "--lake", "{tmp}/lake", "--address", REFUSED, "--class-archive", "{tmp}/no.jsa"],
        "--class-archive '{tmp}/no.jsa': class archive {tmp}/no.jsa: no such file",
        2,
    ),
    (
        [*SNAPSHOT, "--source-password", SECRET, "--trigger", "x"],
        "--trigger 'x'",
        2,
    ),
    # snapshot and lag: the lake of a pipeline, the tables
    (["snapshot", "--lake", "{tmp}/typo", "shop.orders"], "--lake '{tmp}/typo': no such directory", 2),
    (["snapshot", "--lake", "{tmp}", "shop.orders"], "--lake '{tmp}': not a pipeline's lake", 2),
    (["snapshot", "--lake", "{tmp}/lake-tcp", "shop.orders"], "its pipeline takes no snapshot requests", 2),
    (["snapshot", "--lake", "{tmp}/lake-snap", "orders"], "a table to snapshot is db.table, got 'orders'", 2),
    (["lag", "--lake", "{tmp}/missing"], "--lake '{tmp}/missing': no such directory", 2),
    (["lag", "--lake", "{tmp}"], "--lake '{tmp}': not a pipeline's lake (no _pycanal/ in it)", 2),
]


def _listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def _conf(root: Path, **keys: object) -> None:
    (root / "d").mkdir(parents=True)
    lines = {
        "canal.ip": "127.0.0.1",
        "canal.port": free_port(),
        "canal.metrics.pull.port": free_port(),
        "canal.destinations": "d",
        "canal.file.data.dir": root / "data",
        "canal.auto.scan": "false",
        **keys,
    }
    (root / "canal.properties").write_text("".join(f"{k} = {v}\n" for k, v in lines.items()))
    (root / "d" / "instance.properties").write_text(f"canal.instance.master.address = {REFUSED}\n")


@pytest.fixture(scope="module")
def busy() -> socket.socket:
    with _listening() as s:
        yield s


@pytest.fixture
def tmp(tmp_path: Path, busy: socket.socket) -> Path:
    (tmp_path / "file").write_text("x")
    port = busy.getsockname()[1]
    _conf(tmp_path / "conf")
    _conf(tmp_path / "badport", **{"canal.port": "eleven"})
    _conf(tmp_path / "busy-tcp", **{"canal.port": port})
    _conf(tmp_path / "busy-metrics", **{"canal.metrics.pull.port": port})
    (tmp_path / "lake-tcp" / "_pycanal").mkdir(parents=True)
    (tmp_path / "lake-snap" / "_pycanal" / "snapshot-requests").mkdir(parents=True)
    (tmp_path / "lake-snap" / "_pycanal" / "snapshot-requests" / SIGNALS_MARK).touch()  # as a pipeline does
    (tmp_path / "cwd").mkdir()
    return tmp_path


@pytest.fixture(scope="module")
def no_pyspark(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory whose ``pyspark`` fails to import: put first on a pipeline's path, it shows
    that the pipeline's options are refused before anything of Spark is loaded."""
    root = tmp_path_factory.mktemp("no-pyspark")
    (root / "pyspark").mkdir()
    (root / "pyspark" / "__init__.py").write_text(
        'raise ImportError("pyspark imported before the options were checked")\n'
    )
    return str(root)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize(("args", "expected", "code"), CASES, ids=[" ".join(c[0][:4]) for c in CASES])
def test_one_line(
    tmp: Path, busy: socket.socket, no_pyspark: str, args: list[str], expected: str, code: int
) -> None:
    fill = {"tmp": str(tmp), "busy": str(busy.getsockname()[1])}
    argv = [a.format(**fill) for a in args]
    before = _tree(tmp)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if argv[0] == "pipeline":  # no Spark: pyspark cannot even be imported, nor a cluster's conf found
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [no_pyspark, env.get("PYTHONPATH")]))
        for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"):
            env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pycanal.cli", *argv],
        capture_output=True,
        text=True,
        cwd=tmp / "cwd",
        env=env,
        timeout=120,
        check=False,
    )
    lines = done.stderr.splitlines()
    if argv[0] == "server":  # a server's stderr is its log: the records before the error line
        lines = [line for line in lines if not LOG_RECORD.match(line)]
    assert (done.returncode, len(lines)) == (code, 1), done.stderr
    assert done.stdout == ""
    assert lines[0].startswith(
        ("pycanal: error: ", "pycanal binlog decode: error: ", f"pycanal {argv[0]}: error: ")
    )
    assert expected.format(**fill) in lines[0]
    assert SECRET not in done.stderr
    assert _tree(tmp) == before  # no lake, request, data dir or file made


def test_a_password_in_a_parser_error_is_masked(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pycanal.cli", "tail", "--address", REFUSED, "--destination", "d"]
        + ["--password", SECRET, "--batch-size", "many"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and SECRET not in done.stderr and "--batch-size 'many'" in done.stderr
    from pycanal.cli.checks import shown

    assert shown("--source-password", SECRET) == "--source-password ***"
