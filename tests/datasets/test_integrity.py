"""Data integrity of the data root.

The processed cache is verified against its stamp and the registry's statistics, processing
is atomic, processed files are unpickled only with an allow-list, staged files are readable
by others, and a partial OGB folder is completed or reported, never prompting.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo.datasets as zd
from zoo.datasets import cache, mirror
from tests.conftest import AT_THE_START_LINE, started_together

REPO = Path(__file__).resolve().parents[2]
REAL_MIRROR = Path(os.environ.get(mirror.MIRROR_ENV, "").split(os.pathsep)[0] or REPO / ".." / "shared" / "datasets")


@pytest.fixture
def env(monkeypatch, tmp_path):
    if not (REAL_MIRROR / "Cora/raw/ind.cora.x").is_file():
        pytest.skip(f"Cora not in the mirror {REAL_MIRROR}")
    monkeypatch.setenv(mirror.MIRROR_ENV, str(REAL_MIRROR))
    return tmp_path / "root"


def processed(root: Path, folder: str = "Cora") -> Path:
    return root / folder / "processed"


def reference_cora(root: Path):
    return zd.load("cora", root=root, download=False).data


def assert_cora(data, ref) -> None:
    assert (data.num_nodes, data.num_features, int(data.y.max()) + 1) == (2708, 1433, 7)
    assert torch.equal(data.x, ref.x) and torch.equal(data.edge_index, ref.edge_index)


def restamp(folder: Path) -> None:
    """Forge a stamp that matches the folder's current processed files (an attacker could)."""
    stamp = json.loads((folder / cache.STAMP_FILE).read_text())
    stamp["processed"] = {f: [mirror.sha256_of(folder / f), (folder / f).stat().st_size]
                          for f in stamp["processed"]}
    stamp.pop("stats", None)
    (folder / cache.STAMP_FILE).write_text(json.dumps(stamp))


# ---------------------------------------------------------------------- a processed file of another dataset

def test_citeseer_processed_file_over_cora_is_detected(env):
    ref = reference_cora(env)
    zd.load("citeseer", root=env, download=False)
    shutil.copyfile(processed(env, "CiteSeer") / "data.pt", processed(env) / "data.pt")
    with pytest.warns(RuntimeWarning, match=r"re-processing .*Cora/processed: data\.pt differ"):
        data = zd.load("cora", root=env, download=False).data
    assert_cora(data, ref)


def test_citeseer_processed_folder_with_its_stamp_over_cora_is_detected(env):
    ref = reference_cora(env)
    zd.load("citeseer", root=env, download=False)
    shutil.rmtree(processed(env))
    shutil.copytree(processed(env, "CiteSeer"), processed(env))
    with pytest.warns(RuntimeWarning, match="raw files changed"):
        assert_cora(zd.load("cora", root=env, download=False).data, ref)


def test_forged_stamp_is_caught_by_the_registry_statistics(env):
    """Even with a stamp forged to match CiteSeer's file, the loaded statistics betray it."""
    ref = reference_cora(env)
    zd.load("citeseer", root=env, download=False)
    shutil.copyfile(processed(env, "CiteSeer") / "data.pt", processed(env) / "data.pt")
    restamp(processed(env))
    with pytest.warns(RuntimeWarning, match=r"cora: loaded data has .*nodes 3327 \(expected 2708\)"):
        assert_cora(zd.load("cora", root=env, download=False).data, ref)


def test_raw_files_giving_other_statistics_raise_a_clear_error(env, monkeypatch):
    zd.load("cora", root=env, download=False)
    spec = zd.get_spec("cora")
    monkeypatch.setitem(spec.stats, "nodes", 2709)  # as if the raw files were another graph
    with pytest.warns(RuntimeWarning, match="re-processing"):
        with pytest.raises(cache.DataIntegrityError, match=r"nodes 2708 \(expected 2709\).*delete .*Cora/raw"):
            zd.load("cora", root=env, download=False)


def test_flipped_bytes_in_processed_file_are_detected(env):
    ref = reference_cora(env)
    path = processed(env) / "data.pt"
    blob = bytearray(path.read_bytes())
    for i in range(len(blob) // 2, len(blob) // 2 + 8):  # inside the x storage
        blob[i] ^= 0x5A
    path.write_bytes(bytes(blob))
    with pytest.warns(RuntimeWarning, match="re-processing"):
        assert_cora(zd.load("cora", root=env, download=False).data, ref)


# ----------------------------------------------------------------------- truncated or empty processed files

@pytest.mark.parametrize("keep", [0.5, 0.0])
def test_truncated_or_empty_processed_file_is_reprocessed(env, keep):
    ref = reference_cora(env)
    path = processed(env) / "data.pt"
    blob = path.read_bytes()
    path.write_bytes(blob[:int(len(blob) * keep)])
    with pytest.warns(RuntimeWarning, match="re-processing"):
        assert_cora(zd.load("cora", root=env, download=False).data, ref)


def test_kill_9_during_first_processing_leaves_nothing_half_written(env):
    """A process killed while writing processed/data.pt: the next load re-processes cleanly."""
    script = textwrap.dedent(f"""
        import os, signal
        import torch_geometric.io.fs as fs
        real_save = fs.torch_save
        def dying_save(obj, path):
            real_save(obj, path)
            with open(path, "r+b") as f:      # leave a truncated file, as the OS would
                f.truncate(os.path.getsize(path) // 2)
            os.kill(os.getpid(), signal.SIGKILL)
        fs.torch_save = dying_save
        import zoo.datasets as zd
        zd.load("cora", root={str(env)!r}, download=False)
    """)
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    leftovers = [p for p in (env / "Cora").rglob("*") if "tmp" in p.name]
    assert leftovers, "the dying process should have been writing into a temporary folder"
    assert not (processed(env) / "data.pt").exists(), "no half-written file in the real processed folder"
    data = zd.load("cora", root=env, download=False).data
    assert (data.num_nodes, data.num_features) == (2708, 1433)
    assert not [p for p in (env / "Cora").iterdir() if "tmp" in p.name], "stale temporary folder removed"


# ---------------------------------------------------------------------- processed files that would run code

class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _plant(folder: Path, name: str, marker: Path) -> None:
    import pickle

    # a real torch file whose pickle would call Path.touch(marker) if fully unpickled
    torch.save({"x": torch.zeros(2), "evil": _RunsCode(marker)}, folder / name,
               pickle_module=pickle)


def test_crafted_processed_file_is_refused_without_running_code(env, tmp_path):
    reference_cora(env)
    marker = tmp_path / "code-ran"
    _plant(processed(env), "data.pt", marker)
    restamp(processed(env))  # the stamp matches, so only the allow-list stands in the way
    with pytest.raises(cache.UnsafeFileError, match=r"refusing to load .*Cora/processed/data\.pt.*Delete"):
        zd.load("cora", root=env, download=False)
    assert not marker.exists(), "unpickling ran code"


def test_crafted_file_without_matching_stamp_is_reprocessed_not_loaded(env, tmp_path):
    ref = reference_cora(env)
    marker = tmp_path / "code-ran"
    _plant(processed(env), "data.pt", marker)
    _plant(processed(env), "pre_transform.pt", marker)  # PyG itself reads this with weights_only=False
    with pytest.warns(RuntimeWarning, match="re-processing"):
        assert_cora(zd.load("cora", root=env, download=False).data, ref)
    assert not marker.exists(), "unpickling ran code"


def test_safe_torch_load_accepts_pyg_files_only(tmp_path):
    from torch_geometric.data import Data

    ok = tmp_path / "ok.pt"
    torch.save((Data(x=torch.ones(2, 3)).to_dict(), None, Data), ok)
    data, slices, cls = cache.safe_torch_load(ok)
    assert cls is Data and torch.equal(data["x"], torch.ones(2, 3))
    marker = tmp_path / "ran"
    _plant(tmp_path, "bad.pt", marker)
    with pytest.raises(cache.UnsafeFileError):
        cache.safe_torch_load(tmp_path / "bad.pt")
    assert not marker.exists()


# ------------------------------------------------------------------------- file modes in a shared data root

def test_staged_and_processed_files_are_readable_by_others(env):
    old = os.umask(0o022)
    try:
        zd.load("cora", root=env, download=False)
    finally:
        os.umask(old)
    for rel in ("Cora/raw/ind.cora.x", "Cora/raw/ind.cora.graph", "Cora/processed/data.pt",
                "Cora/processed/" + cache.STAMP_FILE):
        assert (env / rel).stat().st_mode & 0o777 == 0o644, rel
    for rel in ("Cora", "Cora/raw", "Cora/processed"):
        assert (env / rel).stat().st_mode & 0o777 == 0o755, rel


# ----------------------------------------------------------------------------- a partial OGB folder

def _toy_molhiv(tmp: Path):
    from ogb.io import DatasetSaver

    rng = np.random.default_rng(0)
    graphs = []
    for _ in range(20):
        n = int(rng.integers(3, 6))
        src = np.arange(n - 1)
        ei = np.concatenate([np.stack([src, src + 1]), np.stack([src + 1, src])], axis=1).astype(np.int64)
        graphs.append({"edge_index": ei, "num_nodes": n, "node_feat": rng.integers(0, 5, (n, 9)).astype(np.int64),
                       "edge_feat": rng.integers(0, 3, (ei.shape[1], 3)).astype(np.int64)})
    saver = DatasetSaver(dataset_name="ogbg-molhiv", is_hetero=False, version=1, root=str(tmp / "saver"))
    saver.save_graph_list(graphs)
    saver.save_target_labels((np.arange(20) % 2).reshape(-1, 1).astype(np.int64))
    saver.save_task_info(task_type="binary classification", eval_metric="rocauc", num_classes=2)
    perm = rng.permutation(20)
    saver.save_split({"train": perm[:12], "valid": perm[12:16], "test": perm[16:]}, split_name="scaffold")
    (tmp / "mapping").mkdir()
    (tmp / "mapping" / "README.md").write_text("toy\n")
    saver.copy_mapping_dir(str(tmp / "mapping"))
    fake = tmp / "mirror"
    shutil.copytree(saver.dataset_dir, fake / "ogb" / "ogbg_molhiv")
    return saver.get_meta_dict(), fake


def _leave_failed_download(root: Path) -> Path:
    """What a failed OGB download leaves: the dataset folder with an empty raw/ and no release file."""
    folder = root / "ogb" / "ogbg_molhiv"
    (folder / "raw").mkdir(parents=True)
    (root / "ogb" / "hiv.zip").write_bytes(b"PK\x03\x04partial")
    return folder


@pytest.fixture
def no_stdin(monkeypatch):
    """stdin closed; any read fails the test loudly (the zoo must never prompt)."""
    import builtins
    import io

    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdin", closed)
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail(f"prompted on stdin: {a}"))


def test_partial_ogb_folder_is_completed_from_the_mirror_without_prompting(tmp_path, monkeypatch, no_stdin):
    meta, fake = _toy_molhiv(tmp_path)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(fake))
    root = tmp_path / "root"
    folder = _leave_failed_download(root)
    task = zd.load("ogbg_molhiv", root=root, meta_dict=meta, download=False)
    assert task.split_sizes() == {"train": 12, "val": 4, "test": 4}
    assert (folder / "RELEASE_v1.txt").is_file()


def test_partial_ogb_folder_without_mirror_is_a_clear_error(tmp_path, monkeypatch, no_stdin):
    meta, _ = _toy_molhiv(tmp_path)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(tmp_path / "no-mirror"))
    root = tmp_path / "root"
    folder = _leave_failed_download(root)
    with pytest.raises(zd.MissingDataError, match=r"ogb/ogbg_molhiv is not a complete OGB release \(missing "
                                                  r"RELEASE_v1\.txt.*Delete it"):
        zd.load("ogbg_molhiv", root=root, meta_dict=meta, download=False)
    assert folder.is_dir(), "offline, the zoo reports but does not delete the user's folder"


def test_real_ogb_path_never_reads_stdin(tmp_path, monkeypatch, no_stdin):
    """The real ogbg-molhiv path (OGB's own meta data) with a poisoned folder: the clear error, no prompt."""
    monkeypatch.setenv(mirror.MIRROR_ENV, str(tmp_path / "no-mirror"))
    root = tmp_path / "root"
    _leave_failed_download(root)
    with pytest.raises(zd.MissingDataError, match="not a complete OGB release"):
        zd.load("ogbg_molhiv", root=root, download=False)


@pytest.mark.slow  # the same in a fresh process's exit code and stderr: test_real_ogb_path_never_reads_stdin
def test_ogb_never_reads_stdin_in_a_subprocess_with_stdin_closed(tmp_path):
    """The real ogbg-molhiv path with a poisoned folder, stdin closed: a clear error, rc 1, no EOFError."""
    root = tmp_path / "root"
    _leave_failed_download(root)
    script = ("import zoo.datasets as zd\n"
              f"zd.load('ogbg_molhiv', root={str(root)!r}, download=False)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), mirror.MIRROR_ENV: str(tmp_path / "no-mirror")}
    proc = subprocess.run([sys.executable, "-c", script], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "MissingDataError" in proc.stderr and "not a complete OGB release" in proc.stderr, proc.stderr[-1500:]
    assert "EOFError" not in proc.stderr and "Will you update" not in proc.stdout


# ----------------------------------------------------------------------- two processes, one data root
def test_two_processes_stage_and_process_one_root_at_once(env, tmp_path):
    """Two pytest workers (or runs) loading Cora into one fresh data root at the same moment: both
    get the whole dataset, one processed folder wins, and no staging or temporary file is left."""
    code = textwrap.dedent(f"""
        import hashlib
        import zoo.datasets as zd
        {AT_THE_START_LINE}
        data = zd.load("cora", root={str(env)!r}, download=False).data
        print(data.num_nodes, data.num_features, hashlib.sha256(data.x.numpy().tobytes()).hexdigest()[:16])
    """)
    full = {**os.environ, mirror.MIRROR_ENV: str(REAL_MIRROR), "OMP_NUM_THREADS": "1"}
    procs = started_together([sys.executable, "-c", code], cwd=REPO, env=full)
    results = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in results]
    first, second = (out.split() for out, _ in results)
    assert first == second and first[:2] == ["2708", "1433"]
    leftovers = [p for p in env.rglob("*") if p.name.endswith((".part", ".tmp")) or cache._TMP_TAG in p.name]
    assert leftovers == []
    assert cache.read_stamp(processed(env)) is not None
