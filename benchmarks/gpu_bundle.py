"""Pack what ``make gpu-check`` needs on a GPU machine without a package index into one archive, so that a
short GPU loan is one call: unpack, run ``run.sh``.

The archive (``--out``, a ``.tar.gz`` written whole or not at all, at most ``--max-mb`` MB, default 60):

* ``gat-zoo/``: this repository at ``HEAD`` (``git archive``: committed files only);
* ``datasets/``: the raw files of the datasets the check reads (:data:`DATASETS`) from the mirror
  (``--data``, default ``../shared/datasets``), with their lines of its ``SHA256SUMS``;
* ``wheels/``: wheels of what a stock CUDA image with torch and Triton lacks (:data:`WHEELS`, pinned
  to the versions installed here), from ``--wheels DIR`` or downloaded (``--download``: ``pip download
  --no-deps --only-binary=:all:`` for ``--python-version`` on manylinux x86-64);
* ``run.sh``: ``sh run.sh OUT`` runs ``benchmarks/gpu_check.py`` with those data and wheels, its summary
  and logs going to ``OUT``.

    python benchmarks/gpu_bundle.py --download --out gpu-bundle.tar.gz
    # on the GPU machine:  mkdir b && tar xzf gpu-bundle.tar.gz -C b && sh b/run.sh "$OUT"
"""
from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets"
#: mirror folders the check reads: Cora, PubMed, Cornell (Geom-GCN's and the heterophilous .npz)
DATASETS = ("Cora", "PubMed", "cornell", "heterophilous/cornell")
#: what the zoo imports beyond torch, Triton and numpy, which a stock CUDA image has
WHEELS = ("torch_geometric", "ogb", "outdated", "littleutils", "safetensors", "tqdm")
RUN_SH = """#!/bin/sh
# make gpu-check from this bundle: sh run.sh [OUT]  (OUT: the summary and logs; default ./out)
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
mkdir -p "$out"
cd "$here/gat-zoo" && exec python3 benchmarks/gpu_check.py --out "$out" --data "$here/datasets" --wheels "$here/wheels"
"""


def pins(names: Sequence[str] = WHEELS) -> List[str]:
    """``name==version`` of each package as installed here (a name alone where it is not)."""
    out = []
    for name in names:
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            out.append(name)
    return out


def download(dest: Path, python_version: str) -> None:
    """The pinned wheels for a manylinux x86-64 machine with ``python_version`` (the package index)."""
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--dest", str(dest),
               "--python-version", python_version, "--platform", "manylinux2014_x86_64",
               "--platform", "manylinux_2_17_x86_64", "--platform", "any", *pins()]
    subprocess.run(command, check=True)


def add_project(tar: tarfile.TarFile) -> str:
    """This repository's ``HEAD`` under ``gat-zoo/``; returns the commit."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    data = subprocess.run(["git", "archive", "--format=tar", "--prefix=gat-zoo/", "HEAD"], cwd=ROOT,
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as src:
        for member in src.getmembers():
            tar.addfile(member, src.extractfile(member) if member.isfile() else None)
    return commit


def add_datasets(tar: tarfile.TarFile, data: Path, folders: Sequence[str] = DATASETS) -> None:
    for folder in folders:
        if not (data / folder).is_dir():
            raise SystemExit(f"gpu_bundle: {data / folder} is not there; give the raw dataset mirror with --data")
        tar.add(data / folder, arcname=f"datasets/{folder}")
    sums = data / "SHA256SUMS"
    if sums.is_file():
        kept = [line for line in sums.read_text().splitlines()
                if any(line.split(None, 1)[-1].lstrip("*").startswith(f"{f}/") for f in folders)]
        _add_text(tar, "datasets/SHA256SUMS", "\n".join(kept) + "\n")


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    raw = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(raw), mode
    tar.addfile(info, io.BytesIO(raw))


def bundle(out: Path, data: Path, wheels: Path, max_mb: float) -> str:
    """Write the archive (see the module docstring); returns a one-line description."""
    found = sorted(wheels.glob("*.whl"))
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            commit = add_project(tar)
            add_datasets(tar, data)
            for wheel in found:
                tar.add(wheel, arcname=f"wheels/{wheel.name}")
            _add_text(tar, "run.sh", RUN_SH, 0o755)
        size = os.path.getsize(tmp) / 2 ** 20
        if size > max_mb:
            raise SystemExit(f"gpu_bundle: the archive would be {size:.1f} MB, over --max-mb {max_mb:g}; "
                             "carry fewer wheels (--wheels DIR)")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return (f"{out}: {size:.1f} MB — gat-zoo at {commit}, datasets {', '.join(DATASETS)}, "
            f"{len(found)} wheel(s): {', '.join(w.name for w in found) or 'none'}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu-bundle.tar.gz")
    p.add_argument("--data", default=str(DATA), help=f"the raw dataset mirror (default {DATA})")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheels", default=None, help="a folder of the wheels to carry")
    source.add_argument("--download", action="store_true", help=f"download the pinned wheels: {', '.join(pins())}")
    p.add_argument("--python-version", default="3.12", help="--download: the GPU machine's Python (default 3.12)")
    p.add_argument("--max-mb", type=float, default=60.0)
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        wheels = Path(args.wheels) if args.wheels else Path(scratch)
        if args.download:
            download(wheels, args.python_version)
        print(bundle(out, Path(args.data), wheels, args.max_mb))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
