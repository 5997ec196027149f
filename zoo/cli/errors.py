"""How the ``zoo`` command ends: its exit codes and the one line a user error becomes.

Exit codes: 0 success; 1 some runs failed (recorded as failed; a re-run retries them); 2 an error
(bad input, unusable folder, corrupt file: one line on stderr); 3 nothing to do (no run recorded:
every dataset missing, or an empty leaderboard); 130 Ctrl-C; 141 the output's reader went away;
143 stopped by SIGTERM (``kill``, SLURM, docker), with the same one line as Ctrl-C.
See docs/reliability.md.
"""
from __future__ import annotations

import os
import sys

EXIT_FAILED = 1     # some runs failed (recorded as failed; a re-run retries them)
EXIT_ERROR = 2      # bad input, unusable folder, corrupt file
EXIT_NOTHING = 3    # nothing ran / nothing to show
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)
EXIT_BROKEN_PIPE = 141  # the output's reader went away (128 + SIGPIPE, as shells report it)
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's ``KeyboardInterrupt`` would be: the same clean-up and one line."""


def raise_terminated(signum: int, frame: object) -> None:
    """The CLI's SIGTERM handler: stop as Ctrl-C stops (workers stopped, nothing half-written)."""
    raise Terminated()


class CliError(Exception):
    """A user error the CLI reports as one line."""


def os_error(e: OSError) -> str:
    """An ``OSError`` as one line: the OS's words and the file, or our own full message."""
    if not e.strerror:  # raised with a full message (ours), not by the OS
        return str(e)
    if e.filename is None:  # a full disk or a closed pipe names no file: "No space left on device: None"
        return e.strerror
    return f"{e.strerror}: {e.filename}" + (f" -> {e.filename2}" if e.filename2 else "")


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail on the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (captured): nothing to flush there
        pass
