"""The parsers of every command: exact option names only, one-line errors, and the
logging options (`-v`, `--log-level`, `--log-format`) on each command, applied by
`configure_logging`: the `worker` logs its runs by default; the other commands print their
own report and log nothing unless asked (`-v`, `--log-level`, `INVOICING_LOG`)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import IO, Any, NoReturn

from invoicing_async._logs import LEVELS, install, json_from_env, level_from_env

__all__ = ["CommandParser", "add_command", "configure_logging", "positive_int"]


class CommandParser(argparse.ArgumentParser):
    """An `ArgumentParser` that takes no abbreviations (`--password` is not
    `--password-env`) and reports a usage error in one line, never echoing values."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            # An unknown option's value may be a secret typed in the wrong place.
            names = sorted({a.partition("=")[0] for a in extra if a.startswith("-")})
            what = ", ".join(names) if names else "extra positional arguments"
            self.error(f"unrecognized arguments: {what} (values not shown)")
        return parsed

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


#: The logging options of every command.
_COMMON = CommandParser(add_help=False)
_LOGGING = _COMMON.add_argument_group("logging")
_LOGGING.add_argument(
    "-v",
    "--verbose",
    action="count",
    default=0,
    help="log more: -v for each run and request retry, -vv for debugging",
)
_LOGGING.add_argument(
    "--log-level",
    choices=LEVELS,
    metavar="LEVEL",
    help=f"the level of the package's log: {', '.join(LEVELS)} (overrides -v)",
)
_LOGGING.add_argument(
    "--log-format",
    choices=("text", "json"),
    metavar="FORMAT",
    help="text: text lines (the default, or INVOICING_LOG_FORMAT), or json: JSON lines for log "
    "shippers (on stderr)",
)


def add_command(commands: Any, name: str, **kwargs: Any) -> CommandParser:
    """A leaf command of `commands` (a subparsers action), with the logging options."""
    parser: CommandParser = commands.add_parser(name, parents=[_COMMON], **kwargs)
    return parser


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def configure_logging(
    args: argparse.Namespace, *, default: int | None = None, stream: IO[str] | None = None
) -> None:
    """Log to stderr (or `stream`) at the level the options ask, else `INVOICING_LOG`'s, else
    `default` (None: nothing); JSON lines with `--log-format json` or `INVOICING_LOG_FORMAT`."""
    level: int | None = default
    if args.log_level:
        level = logging.getLevelName(args.log_level.upper())
    elif args.verbose:
        level = logging.INFO if args.verbose == 1 else logging.DEBUG
    elif (configured := level_from_env()) is not None:
        level = configured
    json_lines = json_from_env() if args.log_format is None else args.log_format == "json"
    install(level, json_lines=json_lines, stream=stream)
