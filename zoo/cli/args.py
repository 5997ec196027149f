"""Argument types, checks and option helpers shared by the ``zoo`` subcommands.

Flags are spelled as the Python and TOML keys they set (``--num-layers`` is ``num_layers``);
:func:`add_renamed` keeps a flag's former spelling working as a hidden alias.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from zoo._toml import tomllib
from zoo.cli.errors import CliError


def parse_device(text: str) -> str:
    """``cpu``, ``cuda``, ``cuda:N`` (or another device torch knows, e.g. ``mps``), checked here: torch's
    own error for ``gpu`` lists twenty device types."""
    import torch

    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; use cpu, cuda or cuda:N (e.g. cuda:1)") from None
    return text


def add_imports(p: argparse.ArgumentParser) -> None:
    """``--import MODULE``: the user's module that registers datasets / models, imported first."""
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first: a module name (the current folder is searched too) or a .py file, "
                        "e.g. one that registers your datasets or models (repeatable; worker processes import it "
                        "too)")


def user_path(text: str) -> str:
    """A path argument with ``~`` expanded: the shell leaves ``--out=~/runs`` as written."""
    return os.path.expanduser(text)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def parse_seeds(text: str) -> List[int]:
    """``"0-4"`` -> [0..4]; ``"0,3,7"``; ``"5"``."""
    seeds: List[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                if int(hi) < int(lo):
                    raise ValueError
                seeds += list(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 0-4 or 0,1,2; got {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds repeat in {text!r}")
    return seeds


def parse_names(text: str) -> List[str]:
    """``"xavier,bal_o"`` -> ``["xavier", "bal_o"]`` (empty parts dropped)."""
    return [v.strip() for v in text.split(",") if v.strip()]


def parse_workers(text: str) -> Any:
    """``--workers``: ``auto`` or a number (its range is the runner's to check: ``RunOptions``)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers takes a number >= 1 or 'auto', got {text!r}") from None


def parse_setting(text: str) -> tuple:
    """``key=value`` with a TOML or JSON value (``8``, ``0.5``, ``true``, ``"add"``, ``[1, 2]``,
    ``{"k": 1}``); bare words are strings."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip() or not raw.strip():
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE, got {text!r} (e.g. --set epochs=200)")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except Exception:
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw.strip()
    return key.strip(), value


def settings_of(pairs: Sequence[tuple]) -> Dict[str, Any]:
    """``--set`` pairs -> ``{key: value}`` (a key given twice is an error)."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CliError(f"--set {key} is given twice ({key}={out[key]!r} and {key}={value!r}); give it once")
        out[key] = value
    return out


def merge_settings(options: Dict[str, Any], pairs: Sequence[tuple], flagged: Sequence[str] = ()) -> Dict[str, Any]:
    """``options`` (keys given by their own flags) with the ``--set`` pairs added; a key given both
    ways (in ``options`` or ``flagged``) is an error."""
    for key, value in pairs:
        if key in options or key in flagged:
            raise CliError(f"{key!r} is given twice (as an option and with --set); give it once")
        options[key] = value
    return options


def writable_dir(path: Path, flag: str, probe: bool = True) -> Path:
    """Create ``path`` if needed and check that it is a folder we can write into (one clear error if not).

    ``probe=False`` (the data root) skips the write test of an existing folder: a read-only data
    root that already holds every dataset is fine, and a write it would need fails as one line.
    """
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                where = "is a file" if p == path else f"is below {p}, which is a file"
                raise CliError(f"{flag} {path} {where}, not a folder; choose a folder path")
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
        if probe:
            with tempfile.TemporaryFile(dir=path):
                pass
    except OSError as e:
        why = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e))
        raise CliError(f"{flag} {path} is not a writable folder ({why}); choose another {flag}") from None
    return path


def add_renamed(parser: Any, flag: str, *former: str, **kwargs: Any) -> argparse.Action:
    """Add ``flag`` (spelled as its Python / TOML key) and its ``former`` spellings as hidden aliases:
    they parse into the same place, and ``--help`` and the usage line show only ``flag``."""
    action = parser.add_argument(flag, **kwargs)
    alias = {k: v for k, v in kwargs.items() if k not in ("dest", "default", "help", "metavar", "required")}
    parser.add_argument(*former, dest=action.dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **alias)
    return action


def add_settings(parser: Any, help: str) -> None:
    """``--set KEY=VALUE`` (repeatable): any suite key the subcommand has no flag for."""
    parser.add_argument("--set", action="append", type=parse_setting, default=[], metavar="KEY=VALUE", help=help)


def add_architecture(parser: Any) -> None:
    """The model's depth, width and inits, named as ``zoo.fit``'s keywords (``zoo train``, ``zoo diagnose``);
    their values are checked where the keys are defined, when the model is built."""
    add_renamed(parser, "--num-layers", "--layers", type=int, metavar="N", help="message-passing layers")
    add_renamed(parser, "--hidden-dim", "--hidden", type=int, metavar="N", help="width of the hidden layers")
    add_renamed(parser, "--inits", "--init", type=parse_names, metavar="A[,B...]",
                help="init plugin; A,B trains each init (x seeds) as replicas side by side, e.g. xavier,bal_o")


class SuiteOrSubcommand(argparse.Action):
    """A positional that is either one of ``commands`` (a subcommand: its parser reads the rest of the
    line) or a value (``dest``; ``options``, an ``add_help=False`` parser, reads the rest of the
    line into the same namespace).  ``zoo bench calibrate ...`` beside ``zoo bench SUITE ...``:
    argparse's subparsers take no free value, and a value is no subcommand."""

    def __init__(self, option_strings: Sequence[str], dest: str, commands: Mapping[str, argparse.ArgumentParser],
                 options: argparse.ArgumentParser, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=argparse.PARSER, **kwargs)
        self.commands, self.options = dict(commands), options

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Any = None) -> None:
        name, rest = values[0], list(values[1:])
        if name in self.commands:  # the subcommand's own defaults replace the parent's (as argparse's subparsers)
            for key, value in vars(self.commands[name].parse_args(rest)).items():
                setattr(namespace, key, value)
            return
        setattr(namespace, self.dest, name)
        _, extra = self.options.parse_known_args(rest, namespace)  # options given before the value are kept
        if "-h" in extra or "--help" in extra:
            parser.print_help()
            parser.exit()
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
