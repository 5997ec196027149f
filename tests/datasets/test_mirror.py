"""Root/mirror resolution, missing and corrupted data, names and options."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

import zoo.datasets as zd
from zoo.datasets import mirror
from zoo.datasets.planetoid import raw_files

REPO = Path(__file__).resolve().parents[2]
REAL_MIRROR = Path(os.environ.get(mirror.MIRROR_ENV, "").split(os.pathsep)[0] or REPO / ".." / "shared" / "datasets")


def make_mirror(tmp: Path, files, corrupt: str = "") -> Path:
    """A small mirror holding ``files`` copied from the real one, with its own SHA256SUMS."""
    if not all((REAL_MIRROR / f).is_file() for f in files):
        pytest.skip(f"cora not in mirror: {REAL_MIRROR}")
    m = tmp / "mirror"
    lines = []
    for rel in files:
        (m / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REAL_MIRROR / rel, m / rel)
        lines.append(f"{hashlib.sha256((m / rel).read_bytes()).hexdigest()}  {rel}")
        if rel == corrupt:
            with open(m / rel, "ab") as f:
                f.write(b"\0garbage")
    (m / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return m


CORA = raw_files("Cora", False)


def test_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "env"))
    assert mirror.resolve_root(tmp_path / "arg") == tmp_path / "arg"
    assert mirror.resolve_root() == tmp_path / "env"
    monkeypatch.delenv("ZOO_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert mirror.resolve_root() == tmp_path / "cache" / "gat-zoo" / "datasets"


def test_several_mirrors_and_staging(monkeypatch, tmp_path):
    m = make_mirror(tmp_path, CORA)
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv(mirror.MIRROR_ENV, os.pathsep.join([str(empty), str(m)]))
    root = tmp_path / "root"
    task = zd.load("cora", root=root, download=False)
    assert task.data.num_nodes == 2708
    for rel in CORA:  # copied into the root, identical, and no temporary files left behind
        assert (root / rel).read_bytes() == (m / rel).read_bytes()
    assert not list(root.rglob("*.part"))


def test_missing_data_error_names_everything(monkeypatch, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv(mirror.MIRROR_ENV, str(empty))
    with pytest.raises(zd.MissingDataError) as err:
        zd.load("cora", root=tmp_path / "root", download=False)
    msg = str(err.value)
    for needle in ("'cora'", "Planetoid", "Cora/raw/ind.cora.x", str(tmp_path / "root"), str(empty),
                   mirror.MIRROR_ENV):
        assert needle in msg, needle


def test_failed_download_becomes_missing_data_error(monkeypatch, tmp_path):
    """With downloads allowed, the class's failing download is reported the same way."""
    from torch_geometric.datasets import WebKB

    def no_network(self):
        raise OSError("network unreachable")

    monkeypatch.setattr(WebKB, "download", no_network)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(tmp_path / "absent"))
    with pytest.raises(zd.MissingDataError, match="cornell.*out1_graph_edges.txt.*network unreachable"):
        zd.load("cornell", root=tmp_path / "root", download=True)


def test_offline_env_disables_download(monkeypatch, tmp_path):
    monkeypatch.setenv(mirror.OFFLINE_ENV, "1")
    monkeypatch.setenv(mirror.MIRROR_ENV, str(tmp_path / "absent"))
    assert not mirror.downloads_allowed()
    with pytest.raises(zd.MissingDataError, match="ppi"):
        zd.load("ppi", root=tmp_path / "root")


def test_corrupted_mirror_file_raises_checksum_error(monkeypatch, tmp_path):
    bad = "Cora/raw/ind.cora.graph"
    m = make_mirror(tmp_path, CORA, corrupt=bad)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(m))
    root = tmp_path / "root"
    with pytest.raises(zd.ChecksumError, match="ind.cora.graph"):
        zd.load("cora", root=root, download=False)
    assert not (root / bad).exists() and not list(root.rglob("*.part")), "a bad copy must not stay in the root"


def test_corrupted_cached_file_raises_checksum_error(monkeypatch, tmp_path):
    m = make_mirror(tmp_path, CORA)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(m))
    root = tmp_path / "root"
    zd.load("cora", root=root, download=False)
    (root / "Cora/raw/ind.cora.y").write_bytes(b"tampered")
    with pytest.raises(zd.ChecksumError, match=r"ind\.cora\.y.*Delete the cached copy"):
        zd.load("cora", root=root, download=False)


def test_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match="'citeseer'") as err:
        zd.load("citeseeer")
    assert "Valid datasets" in str(err.value) and "amazon_photo" in str(err.value)


def test_names_are_normalised(monkeypatch, tmp_path):
    task = zd.load("Twin", k=3)
    assert task.name == "twin"
    assert zd.get_spec("Amazon-Photo").name == "amazon_photo"
    assert zd.get_spec("film").name == "actor"


def test_unknown_option_is_a_type_error_naming_valid_ones():
    with pytest.raises(TypeError, match="'undirectd'.*did you mean 'undirected'.*Valid options"):
        zd.load("chameleon", undirectd=True)


def test_bad_split_names_valid_ones(monkeypatch, tmp_path):
    monkeypatch.setenv(mirror.MIRROR_ENV, str(make_mirror(tmp_path, CORA)))
    with pytest.raises(ValueError, match="unknown split 'publik'.*'public'.*per_class"):
        zd.load("cora", root=tmp_path / "root", split="publik", download=False)


def test_docs_state_the_default_data_root():
    from tests.conftest import REPO
    from zoo.datasets.mirror import default_root

    rel = "gat-zoo/datasets"
    assert default_root().as_posix().endswith(rel)
    for doc in ("README.md", "docs/datasets.md"):
        assert f"~/.cache/{rel}" in (REPO / doc).read_text(), f"{doc} states another default data root"
