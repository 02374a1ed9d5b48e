"""``pycanal binlog decode``: the seed-002 text layout, jsonl (in parts too), positions and the demo job."""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pycanal.cli", *args], capture_output=True, text=True, check=False
    )


def test_text_layout_mirrors_the_canal_client(fixtures_dir: Path) -> None:
    out = run("binlog", "decode", str(fixtures_dir / "binlog-parser/mysql-bin.01"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "*" * 52
    assert lines[1].startswith(
        "* Batch Id: [1] ,count : [3] , memsize : [247] , Time : "
    )  # entries, Canal's sum
    assert lines[2].startswith("* Start : [mysql-bin.01:120:1492065270000(")
    assert "================> binlog[mysql-bin.01:120] , executeTime : 1492065270000 , delay : " in out.stdout
    assert "BEGIN ----> Thread id: 1" in lines
    assert any(
        line.startswith(
            "----------------> binlog[mysql-bin.01:258] , name[test_db,buildings] , eventType : INSERT , "
            "executeTime : 1492065270000 , delay : "
        )
        for line in lines
    )
    assert "@2 : ACME Headquaters type=varchar(765) update=true" in lines
    assert "END ----> transaction id: 9" in lines


def test_jsonl_positions_and_start_stop(fixtures_dir: Path) -> None:
    path = str(fixtures_dir / "binlog-parser/mysql-bin.01")
    full = [
        json.loads(line) for line in run("binlog", "decode", "--format", "jsonl", path).stdout.splitlines()
    ]
    assert {r["type"] for r in full} >= {"BEGIN", "INSERT", "UPDATE", "DELETE", "COMMIT"}
    keys = [
        "type",
        "file",
        "pos",
        "next_pos",
        "ts",
        "server_id",
        "gtid",
        "xid",
        "schema",
        "table",
        "columns",
        "before",
        "after",
        "sql",
    ]
    assert all(list(r)[: len(keys)] == keys for r in full)
    begin = next(r for r in full if r["type"] == "BEGIN" and r["pos"] > 4 and r is not full[0])
    part = run("binlog", "decode", "--format", "jsonl", "--start-position", str(begin["pos"]), path)
    assert [json.loads(line) for line in part.stdout.splitlines()] == [
        r for r in full if r["pos"] >= begin["pos"]
    ]
    stop = run("binlog", "decode", "--format", "jsonl", "--stop-position", str(begin["pos"]), path)
    assert [json.loads(line) for line in stop.stdout.splitlines()] == [
        r for r in full if r["pos"] < begin["pos"]
    ]


def test_start_position_off_an_event_boundary_is_an_error(fixtures_dir: Path) -> None:
    path = fixtures_dir / "binlog-parser/mysql-bin.01"
    out = run("binlog", "decode", "--start-position", "125", str(path))
    assert out.returncode != 0
    assert (
        out.stderr.strip()
        == f"pycanal: error: {path}, offset 125: start position 125 is not at an event boundary"
    )


@pytest.mark.parametrize(
    "names",
    [
        ["mysql-binlog-connector-java/mysql-bin.sakila"],  # 47,342 lines
        ["tiflow/mysql-bin.000001"],  # bad row data in the second of 4 parts, 2 parts after it
        ["rust_mysql_common/corrupt-relay-bin.000624"],  # an overrunning field in the last part
        ["binlog-parser/mysql-bin.01", "mysql-binlog-connector-java/mysql-bin.sakila"],
    ],
)
def test_jsonl_in_parts_is_what_one_process_writes(fixtures_dir: Path, names: list[str]) -> None:
    """``--workers N`` decodes each file's parts in N processes: the same lines, in order, and where
    a part fails, the lines before the bad event, then the same one-line error."""
    paths = [str(fixtures_dir / name) for name in names]
    one = run("binlog", "decode", "--format", "jsonl", "--workers", "1", *paths)
    assert one.stdout.count("\n") > 20
    for workers in ("2", "4"):
        many = run("binlog", "decode", "--format", "jsonl", "--workers", workers, *paths)
        assert (many.returncode, many.stderr) == (one.returncode, one.stderr)
        assert many.stdout == one.stdout


@pytest.mark.parametrize("append", [False, True], ids=["file", "appended"])
def test_jsonl_parts_reach_a_file_output_whole(fixtures_dir: Path, tmp_path: Path, append: bool) -> None:
    """The parts' lines go from their files in ``TMPDIR`` to the output by ``sendfile``, or copied
    where the output refuses it (opened ``>>``, O_APPEND): the same bytes after what the file held,
    and the temporary files gone."""
    path = str(fixtures_dir / "mysql-binlog-connector-java/mysql-bin.sakila")
    one = run("binlog", "decode", "--format", "jsonl", "--workers", "1", path)
    spool = tmp_path / "tmp"
    spool.mkdir()
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"before\n")
    with open(out, "ab" if append else "r+b") as sink:
        sink.seek(0, os.SEEK_END)
        done = subprocess.run(
            [sys.executable, "-m", "pycanal.cli", "binlog", "decode", "--format", "jsonl", "--workers", "2", path],
            stdout=sink, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(spool)), check=False,
        )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert out.read_text() == "before\n" + one.stdout
    assert list(spool.iterdir()) == []


def test_jsonl_parts_into_a_reader_that_stops_early(fixtures_dir: Path, tmp_path: Path) -> None:
    """``| head -1``: the output pipe closes under the parts' sendfile; the command ends quietly
    with status 0 and leaves no temporary file."""
    path = str(fixtures_dir / "mysql-binlog-connector-java/mysql-bin.sakila")
    cmd = f"{shlex.quote(sys.executable)} -m pycanal.cli binlog decode --format jsonl --workers 2 {shlex.quote(path)}"
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd} | head -1"], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(tmp_path)), check=False, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith('{"type": "DDL"') and done.stdout.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_jsonl_parts_that_cannot_be_spooled_are_one_line(fixtures_dir: Path, tmp_path: Path) -> None:
    """A part's lines that the temporary directory does not take (here a 64 KiB file size limit, as
    a full disk would refuse them): one line naming the binlog file, the part and the directory,
    status 1, and the directory removed."""
    path = fixtures_dir / "mysql-binlog-connector-java/mysql-bin.sakila"

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    done = subprocess.run(
        [sys.executable, "-m", "pycanal.cli", "binlog", "decode", "--format", "jsonl", "--workers", "2", str(path)],
        capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(tmp_path)), preexec_fn=limited,
        check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert re.fullmatch(
        rf"pycanal: error: {re.escape(str(path))}: the lines of its part at offset \d+ cannot be written to the "
        rf"temporary directory {re.escape(str(tmp_path))}/pycanal-decode-\w+ \(TMPDIR\): File too large\n",
        done.stderr,
    ), done.stderr
    assert list(tmp_path.iterdir()) == []


# Two Spark JVMs one after the other (the demo's, then spark-sql's cold one): 136 s alone and 275-399 s
# beside the suite's workers on 2026-12-02's slow machine, over the default 300 s once in CI.
@pytest.mark.timeout(600)
@pytest.mark.mariadb
def test_demo_job(tmp_path: Path) -> None:
    """``make demo``'s job, shortened: MariaDB -> pycanal server -> Spark -> Delta, then the
    per-table comparison (its own process: the demo owns its SparkSession)."""
    done = subprocess.run(
        [sys.executable, "-m", "pycanal.demo", "--seconds", "5", "--preload-seconds", "3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for table in ("customers", "products", "orders", "order_items"):
        line = next(x for x in out.splitlines() if x.startswith(table + " "))
        assert line.endswith("OK"), line
    assert "(ALTER TABLE done)" in out and "all tables equal" in out
    assert (tmp_path / "var" / "demo" / "lake" / "current" / "shop" / "orders" / "_delta_log").is_dir()
    # The Spark SQL query it prints runs as printed (a shell without the virtualenv's PATH), and so
    # do the delta-rs lines, on tables with deletion vectors: the same counts as the demo's own query.
    lines = out.splitlines()
    at = lines.index("6. a Spark SQL query over the lake (Delta tables by path), run here:") + 2
    shell = lines.index("   the same from a shell (Spark's Delta from Maven, as pycanal's sessions get it):")
    counts = {r.split()[0]: (int(r.split()[1].replace(",", "")), r.split()[3]) for r in lines[at:shell]}
    assert counts and sum(n for n, _ in counts.values()) == int(
        next(x for x in lines if x.startswith("orders ")).split()[1].replace(",", "")
    )
    venv = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if d != venv))
    sql = subprocess.run(["bash", "-c", lines[shell + 1]], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert sql.returncode == 0, sql.stderr[-3000:]
    assert {
        r.split("\t")[0]: (int(r.split("\t")[1]), r.split("\t")[2]) for r in sql.stdout.splitlines()
    } == counts
    start = next(i for i, x in enumerate(lines) if x.startswith("   delta-rs (Python")) + 1
    code = "\n".join(x.strip() for x in lines[start : start + 2])
    by_delta_rs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert by_delta_rs.returncode == 0, by_delta_rs.stderr
    for status, (n, _) in counts.items():
        assert re.search(rf"\| {status} +\| {n} +\|", by_delta_rs.stdout), by_delta_rs.stdout


_IMPORTED = """
import runpy, sys
sys.argv = ["pycanal", *sys.argv[1:]]
try:
    runpy.run_module("pycanal.cli", run_name="__main__")
except SystemExit as exc:
    print(exc.code, sorted(m for m in ("pyspark", "pandas", "deltalake") if m in sys.modules))
"""


def test_pipeline_refuses_a_wrong_option_before_importing_spark(tmp_path: Path) -> None:
    # Its checks (pycanal.spark.canal_options) answer without Spark, pandas or Delta: ~1 s of imports.
    lake = str(tmp_path / "lake")
    for args in (["--topic", "t"], ["--address", "127.0.0.1:1", "--trigger", "soon"]):
        done = subprocess.run([sys.executable, "-c", _IMPORTED, "pipeline", "--lake", lake, *args],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.stdout == "2 []\n", done.stdout + done.stderr
        assert done.stderr.startswith("pycanal: error: --"), done.stderr


def test_pipeline_refuses_an_unknown_snapshot_reader(tmp_path: Path) -> None:
    done = run("pipeline", "--address", "127.0.0.1:1", "--lake", str(tmp_path), "--snapshot-reader", "jdbc")
    assert done.returncode == 2
    assert done.stderr == "pycanal: error: --snapshot-reader 'jdbc': must be one of connectorx, pymysql\n"
    assert not list(tmp_path.iterdir())  # refused before any Spark or lake work


@pytest.mark.parametrize(
    ("flags", "expected", "archive"),
    [
        ([], "-XX:+UseParallelGC -XX:TieredStopAtLevel=1", "auto"),
        (["--driver-java-options=-Xss4m", "--class-archive", "off", "--no-deletion-vectors"], "-Xss4m", None),
        (
            ["--class-archive", "ARCHIVE", "--deletion-vectors"],
            "-XX:+UseParallelGC -XX:TieredStopAtLevel=1",
            "ARCHIVE",
        ),
    ],
)
def test_pipeline_passes_the_driver_java_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str, archive: str | None
) -> None:
    from typer.testing import CliRunner

    import pycanal.spark.job as job
    from pycanal.cli import app

    made = tmp_path / "spark.jsa"
    made.write_bytes(b"x")
    flags = [str(made) if f == "ARCHIVE" else f for f in flags]
    archive = str(made) if archive == "ARCHIVE" else archive
    seen: dict = {}
    monkeypatch.setattr(job, "run", lambda lake, **kw: seen.update(kw) or 0)
    done = CliRunner().invoke(app, ["pipeline", "--address", "127.0.0.1:1", "--lake", str(tmp_path), *flags])
    assert done.exit_code == 0, done.output
    vectors = "--no-deletion-vectors" not in flags  # on by default
    assert (seen["java_options"], seen["class_archive"]) == (expected, archive)
    assert seen["maintenance"].deletion_vectors is vectors


def test_pipeline_refuses_a_class_archive_that_is_not_there(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.jsa"
    done = run(
        "pipeline",
        "--address",
        "127.0.0.1:1",
        "--lake",
        str(tmp_path / "lake"),
        "--class-archive",
        str(missing),
    )
    assert done.returncode == 2 and f"class archive {missing}: no such file" in done.stderr
    assert not (tmp_path / "lake").exists()  # refused before any Spark or lake work


def test_pipeline_kafka_config_is_checked_before_spark_starts(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    done = run(
        "pipeline", "--address", "127.0.0.1:1", "--lake", lake, "--kafka-config", "security.protocol=SSL"
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == "pycanal: error: --kafka-config: needs --kafka HOST:PORT (a setting of the Kafka consumer)\n"
    )
    kafka = ["pipeline", "--kafka", "127.0.0.1:9092", "--topic", "t", "--lake", lake]
    done = run(*kafka, "--kafka-config", "kafka.group.id=mine")
    assert done.returncode == 2
    assert done.stderr == (
        "pycanal: error: --kafka-config 'group.id': set by Spark's Kafka source itself (or by --kafka): "
        "not a setting to give\n"
    )
    done = run(*kafka, "--kafka-config", "sasl.jaas.config")  # no '=': the value is never echoed
    assert done.returncode == 2 and done.stderr == "pycanal: error: --kafka-config #1: expected KEY=VALUE\n"
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("sizes", [[], [5] * 3000, [100_000] * 7, [300_000, 1, 262_143, 262_144, 0, 2]])
def test_lines_are_written_whole_in_chunks(sizes: list[int]) -> None:
    """``_write`` flushes every 1,024 lines or 256 Ki characters: each line once, in order, ended by
    a newline, whatever the chunk boundaries; and the count of lines."""
    import io

    from pycanal.cli.binlog import _write

    lines = [chr(97 + i % 26) * n for i, n in enumerate(sizes)]
    out = io.StringIO()
    assert _write(out, iter(lines)) == len(lines)
    assert out.getvalue() == "".join(line + "\n" for line in lines)


@pytest.mark.parametrize("path", ["binlog decode", "dump", "server", "tail", "pipeline", "snapshot", "lag"])
def test_a_command_line_runs_an_app_of_its_command_alone_that_parses_as_the_whole(path: str) -> None:
    """``main`` builds the app of the command a command line names (typer reads every command's
    signature to build a parser): its help and its complaint about a bad option are the whole app's."""
    from typer.testing import CliRunner

    from pycanal import cli

    args = path.split()
    assert cli._app_for(args) is not cli.app
    for extra in (["--help"], ["--no-such-option"]):
        whole = CliRunner().invoke(cli.app, [*args, *extra])
        one = CliRunner().invoke(cli._app_for([*args, *extra]), [*args, *extra])
        assert (one.exit_code, one.output) == (whole.exit_code, whole.output)
    assert cli._app_for(["binlog"]) is cli._app_for(["--help", *args]) is cli.app
