"""Logging for the commands (`_logs`): the `worker` logs its runs by default; the others
print their own report and log nothing unless asked (`-v`, `--log-level`, `INVOICING_LOG`)."""

from __future__ import annotations

import argparse
import logging
from typing import IO

from invoicing_async._logs import install, json_from_env, level_from_env

__all__ = ["configure_logging"]


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
