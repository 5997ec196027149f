"""The package installs as a wheel with its catalogue (presets) and suites inside it."""
from __future__ import annotations

import configparser
import os
import subprocess
import sys
import sysconfig
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def declared_packages() -> set:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return {p.strip() for p in cfg["options"]["packages"].split("\n") if p.strip()}


def test_setup_cfg_lists_every_package():
    on_disk = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "zoo").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    missing = on_disk - declared_packages()
    assert not missing, f"add {sorted(missing)} to [options] packages in setup.cfg (the wheel would lack them)"
    assert {"zoo._catalogue", "zoo._suites"} <= declared_packages()


def test_wheel_in_a_fresh_venv_resolves_presets_and_suites(tmp_path):
    """Build a wheel, install it (no editable paths) into a temp venv, build a preset from outside the repo."""
    # without PYTHONPATH: a checkout on it (its zoo, the egg-info the build leaves there) would make pip see
    # gat-zoo as installed and shadow the wheel's zoo
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheel_dir = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheel_dir), str(REPO)],
        check=True, capture_output=True, text=True,
    )
    wheel = next(wheel_dir.glob("gat_zoo-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, text=True, env=env,
    )
    # Dependencies (torch, PyG) come from this environment; a path line in a .pth file does not
    # activate this environment's editable install of zoo, so only the wheel's zoo is importable.
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = (
        "import zoo, importlib.resources as r; "
        "m = zoo.build('gat.velickovic2018_cora', in_dim=5, out_dim=3); "
        "print(zoo.__file__); print(m.heads, m.out_heads, m.dropout); "
        "print(sorted(p.name for p in r.files('zoo._suites').iterdir() if p.name.endswith('.toml')))"
    )
    out = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    location, config, suites = out.stdout.strip().splitlines()
    assert str(purelib) in location, f"zoo imported from {location}, not from the installed wheel"
    assert config == "8 1 0.6"
    assert "quick.toml" in suites, f"suites missing from the wheel: {suites}"
