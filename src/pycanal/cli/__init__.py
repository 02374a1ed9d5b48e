"""The ``pycanal`` command line.

Every failure the user can act on is one line on stderr, ``pycanal: error: <what>``, naming the
option, file, address or destination and the value (passwords masked): a bad option exits 2
before anything starts, a failure while running exits 1. Only a bug shows a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

import typer
from typer._click.exceptions import BadParameter, NoArgsIsHelpError, UsageError

from . import binlog, lake, server
from .checks import CliError, shown

__all__ = ["COMMANDS", "CliError", "app", "build_app", "main"]

# Every command by its path. A command line that names one runs an app of that command alone:
# typer reads each command's signature and annotations to build its parser when it runs, 12.5 ms
# for the seven against 1.1 ms for one, in every run of the CLI.
COMMANDS = {
    ("binlog", "decode"): binlog.decode,
    ("dump",): binlog.dump,
    ("server",): server.server,
    ("tail",): server.tail,
    ("pipeline",): lake.pipeline,
    ("snapshot",): lake.snapshot,
    ("lag",): lake.lag,
}
GROUPS = {"binlog": "Work with binlog files."}


def _root() -> None:
    pass


def build_app(paths: Sequence[tuple[str, ...]] = tuple(COMMANDS)) -> typer.Typer:
    """The ``pycanal`` app with the commands at ``paths`` (all of them by default)."""
    root = typer.Typer(
        help="pycanal: MySQL/MariaDB binlog subscription and consumption, after Alibaba Canal.",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    root.callback()(_root)  # a group even with one command (typer runs a lone command as the app)
    groups: dict[str, typer.Typer] = {}
    for path in paths:
        if len(path) == 1:
            root.command(path[0])(COMMANDS[path])
            continue
        group = groups.get(path[0])
        if group is None:
            group = groups[path[0]] = typer.Typer(
                help=GROUPS[path[0]], no_args_is_help=True, rich_markup_mode=None
            )
            root.add_typer(group, name=path[0])
        group.command(path[1])(COMMANDS[path])
    return root


app = build_app()


def _app_for(args: Sequence[str]) -> typer.Typer:
    """The app of the one command ``args`` start with, else (help, a typo, a group alone) all."""
    for path in COMMANDS:
        if tuple(args[: len(path)]) == path:
            return build_app([path])
    return app


def _given(args: Sequence[str], opts: Sequence[str]) -> str | None:
    """The value the command line gave one of ``opts`` (the last one, as the parser takes it)."""
    found = None
    for i, arg in enumerate(args):
        for opt in opts:
            if arg == opt and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(opt + "="):
                found = arg[len(opt) + 1 :]
    return found


def _usage_line(exc: UsageError, args: Sequence[str]) -> str:
    """A parser's complaint as one line naming the option and the value given."""
    if isinstance(exc, BadParameter) and exc.param is not None and exc.param.opts:
        opts = [o for o in exc.param.opts if o.startswith("-")]
        value = _given(args, opts) if opts else None
        if value is not None:
            message = exc.message[:1].lower() + exc.message[1:]
            return f"{shown(opts[0], value)}: {message}"
    return exc.format_message()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line (``argv`` without the program name; default ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _app_for(args)(args=args, prog_name="pycanal", standalone_mode=False)
    except NoArgsIsHelpError as exc:
        exc.show()
        code = 2
    except UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "pycanal"
        print(f"{command}: error: {_usage_line(exc, args)} (see {command} --help)", file=sys.stderr)
        code = 2
    except CliError as exc:
        sys.stdout.flush()
        print(f"pycanal: error: {exc}", file=sys.stderr)
        code = exc.code
    except typer.Exit as exc:
        code = exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    sys.exit(code if isinstance(code, int) else 0)
