"""zoo.save / zoo.load: safetensors weights + the build configuration; clear errors for what cannot load."""
from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.model_file import META_KEY, read_header


def _outputs(model, graph):
    model.eval()
    with torch.no_grad():
        return model(*graph)


@pytest.mark.parametrize("name,options", [
    ("gatv2", {"num_layers": 3, "init": "bal_o"}),
    ("gat", {"num_layers": 2, "heads": 2, "norm": "pairnorm"}),
    ("gatdb", {"num_layers": 2}),  # lazily-shaped per-edge parameters
    ("gcn", {"num_layers": 2, "dtype_test": True}),
])
def test_saved_model_gives_identical_outputs(tmp_path, graph, name, options):
    options = dict(options)
    double = options.pop("dtype_test", False)
    model = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, **options)
    if double:
        model = model.double()
        graph = (graph[0], graph[1].double())
    before = _outputs(model, graph)
    path = zoo.save(model, tmp_path / "m", extra={"note": "test"})
    assert path.suffix == ".safetensors"
    loaded = zoo.load(path)
    assert loaded.build_config == model.build_config
    assert loaded.saved_header["extra"] == {"note": "test"}
    after = _outputs(loaded, graph)
    assert after.dtype == before.dtype
    assert torch.equal(before, after)
    for (k, a), (k2, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and torch.equal(a, b)


def test_a_loaded_model_trains_without_recomputing_its_layers(tmp_path, graph, monkeypatch):
    """zoo.load puts the file's header on the model.  While both were called ``checkpoint``, the header
    (a non-empty dict) replaced the flag that switches activation recomputation on, so every loaded
    model recomputed each layer in its backward pass; a model saved with ``recompute=True`` keeps it."""
    import zoo.nn.base as base

    calls = []
    real = base.checkpoint
    monkeypatch.setattr(base, "checkpoint", lambda *a, **k: calls.append(1) or real(*a, **k))
    for recompute in (False, True):
        model = zoo.build("gatv2", in_dim=6, out_dim=3, hidden_dim=8, num_layers=2, recompute=recompute)
        loaded = zoo.load(zoo.save(model, tmp_path / f"m{recompute}"))
        calls.clear()
        loaded.train()
        loaded(*graph).sum().backward()
        assert bool(calls) is recompute, (recompute, len(calls))
        assert loaded.recompute is recompute


def test_a_file_written_with_the_old_recompute_spelling_loads(tmp_path):
    """Model files record the build options; files written while ``recompute`` was spelt ``checkpoint``
    still rebuild, with recomputation as they were saved."""
    from zoo.model_file import rebuild

    header = {"build": {"name": "gatv2", "in_dim": 6, "out_dim": 3, "num_layers": 2, "checkpoint": True}}
    assert rebuild(header, "old.safetensors").recompute is True


def test_model_file_holds_no_pickle(tmp_path, graph):
    model = zoo.build("gatv2", in_dim=6, out_dim=3, hidden_dim=8, num_layers=2)
    path = zoo.save(model, tmp_path / "m.safetensors")
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])  # the safetensors layout: a JSON table, then raw tensor bytes
    meta = json.loads(header["__metadata__"][META_KEY])
    assert meta["build"]["name"] == "gatv2" and meta["build"]["num_layers"] == 2
    assert meta["zoo_version"] == zoo.__version__ and meta["dtype"] == "float32"
    assert b"\x80\x04" not in data[:8 + n]  # no pickle protocol marker in the header


def test_graph_pool_head_round_trips(tmp_path):
    from zoo.nn.readout import GraphPool

    gnn = zoo.build("gat", in_dim=6, out_dim=8, hidden_dim=8, num_layers=2)
    model = GraphPool(gnn, 8, 3, readout="sum")
    loaded = zoo.load(zoo.save(model, tmp_path / "pool"))
    assert isinstance(loaded, GraphPool) and loaded.config == model.config
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)


def _rewrite_header(path, change):
    from safetensors.torch import load_file, save_file

    meta = json.loads(read_header_raw(path))
    change(meta)
    save_file(load_file(str(path)), str(path), metadata={META_KEY: json.dumps(meta)})


def read_header_raw(path):
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        return fh.metadata()[META_KEY]


def test_model_file_from_a_newer_zoo_is_one_clear_line(tmp_path):
    path = zoo.save(zoo.build("gcn", in_dim=6, out_dim=3, num_layers=2), tmp_path / "m")
    _rewrite_header(path, lambda m: m.update(zoo_version="99.0.0"))
    with pytest.raises(ValueError, match=r"written by gat-zoo 99\.0\.0.*newer than this gat-zoo.*upgrade") as e:
        zoo.load(path)
    assert "\n" not in str(e.value)


def test_model_file_with_unknown_options_is_one_clear_line(tmp_path):
    path = zoo.save(zoo.build("gcn", in_dim=6, out_dim=3, num_layers=2), tmp_path / "m")
    _rewrite_header(path, lambda m: m["build"].update(warp_drive=3))
    with pytest.raises(ValueError, match=r"cannot be rebuilt by this gat-zoo.*warp_drive") as e:
        zoo.load(path)
    assert "\n" not in str(e.value)


def test_not_a_model_file_and_not_a_zoo_model(tmp_path):
    from safetensors.torch import save_file

    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(plain))
    with pytest.raises(ValueError, match="not a zoo model file"):
        zoo.load(plain)
    (tmp_path / "junk.safetensors").write_bytes(b"not at all")
    with pytest.raises(ValueError, match="not a safetensors file"):
        zoo.load(tmp_path / "junk.safetensors")
    with pytest.raises(TypeError, match="not built by zoo.build"):
        zoo.save(torch.nn.Linear(2, 2), tmp_path / "lin")
    with pytest.raises(TypeError, match="cannot be written to a model file"):
        zoo.save(zoo.build("gcn", in_dim=6, out_dim=3, num_layers=2), tmp_path / "x", extra={"f": object()})


def test_read_header(tmp_path):
    path = zoo.save(zoo.build("gatv2", in_dim=6, out_dim=3, num_layers=2, init="bal_o"), tmp_path / "m")
    header = read_header(path)
    assert header["build"]["init"] == "balanced_orthogonal" and header["head"] is None  # the registered name


def test_load_takes_the_name_given_to_save(tmp_path):
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2)
    written = zoo.save(model, tmp_path / "m.ckpt")
    assert written.name == "m.ckpt.safetensors"
    again = zoo.load(tmp_path / "m.ckpt")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_save_warns_before_replacing_a_file(tmp_path):
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2)
    zoo.save(model, tmp_path / "m")
    with pytest.warns(UserWarning, match=r"zoo.save: replacing .*m.safetensors"):
        zoo.save(model, tmp_path / "m")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.save(model, tmp_path / "m", overwrite=True)


def test_a_full_disk_leaves_no_temporary_file_and_names_the_path(tmp_path, monkeypatch):
    import errno
    import os

    from zoo.bench.store.weights import write_weights
    from zoo.cli.errors import os_error

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2)
    with pytest.raises(OSError) as info:
        zoo.save(model, tmp_path / "m")
    assert os_error(info.value) == f"No space left on device: {tmp_path / 'm.safetensors'}"
    with pytest.raises(OSError, match="No space left on device"):
        write_weights(tmp_path / "out", "abc", b"bytes")
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
    assert os_error(OSError(errno.EPIPE, "Broken pipe")) == "Broken pipe"
