"""``zoo/cli/plugin_names.json`` (what ``zoo list`` reads instead of importing torch) equals the registries."""
import subprocess
import sys

import pytest

from zoo.cli import plugin_names
from zoo.cli import main
from zoo.cli.listing import overview


@pytest.mark.parametrize("section", sorted(plugin_names.SECTIONS))
def test_the_stored_names_are_the_registries(section):
    assert plugin_names.stored()[section] == plugin_names.live(section), (
        "zoo/cli/plugin_names.json is out of date: run `zoo docs` and commit it")


def test_the_file_is_what_zoo_docs_writes():
    assert plugin_names.PATH.read_text(encoding="utf-8") == plugin_names.render()


def test_zoo_list_imports_neither_torch_nor_pyg():
    code = ("import sys; from zoo.cli import main; rc = main(['list']); "
            "print(rc, 'torch' in sys.modules, 'torch_geometric' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "gatv2" in out and "balanced_orthogonal (bal_o" in out and "cora" in out and "balance_table2" in out
    assert out.strip().splitlines()[-1] == "0 False False"


def test_a_plugin_registered_in_this_process_is_listed(capsys):
    from zoo.inits import INITS, register_init

    @register_init("listing_probe_init", aliases=("lpi",))
    def listing_probe_init(model):  # pragma: no cover - never applied
        return model

    try:
        assert main(["list"]) == 0
        assert "listing_probe_init (lpi)" in capsys.readouterr().out
    finally:
        INITS._items.pop("listing_probe_init", None)
        INITS._aliases.pop("lpi", None)
    assert "listing_probe_init" not in overview()
