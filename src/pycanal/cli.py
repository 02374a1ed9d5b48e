"""The ``pycanal`` command line."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .binlog.canonical import Recorder, to_json_line
from .binlog.decoder import EventDecoder
from .binlog.errors import BinlogError
from .binlog.printer import TextPrinter
from .binlog.reader import read_events

app = typer.Typer(
    help="pycanal: MySQL/MariaDB binlog subscription and consumption, after Alibaba Canal.",
    no_args_is_help=True,
    add_completion=False,
)
binlog_app = typer.Typer(help="Work with binlog files.", no_args_is_help=True)
app.add_typer(binlog_app, name="binlog")


class Format(StrEnum):
    text = "text"
    jsonl = "jsonl"


def _events(files: list[Path], start: int | None, stop: int | None):
    decoder = EventDecoder()
    for n, path in enumerate(files):
        yield from read_events(
            path,
            start_position=start if n == 0 else None,
            stop_position=stop if n == len(files) - 1 else None,
            decoder=decoder,
        )


@binlog_app.command("decode")
def decode(
    files: Annotated[list[Path], typer.Argument(help="Binlog files, decoded in order.")],
    fmt: Annotated[
        Format, typer.Option("--format", help="text (Canal client layout) or jsonl.")
    ] = Format.text,
    start_position: Annotated[
        int | None, typer.Option(help="Start at this event offset of the first file.")
    ] = None,
    stop_position: Annotated[
        int | None, typer.Option(help="Stop before this offset of the last file.")
    ] = None,
) -> None:
    """Decode binlog files into row changes, DDL and transaction markers."""
    recorder = Recorder()
    out = sys.stdout
    try:
        records = recorder.records(_events(files, start_position, stop_position))
        if fmt is Format.jsonl:
            for rec in records:
                out.write(to_json_line(rec))
                out.write("\n")
        else:
            for line in TextPrinter().lines(records, recorder.tables):
                out.write(line)
                out.write("\n")
    except BinlogError as exc:
        out.flush()
        typer.echo(f"pycanal: error: {exc}", err=True)
        raise typer.Exit(2) from None
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
