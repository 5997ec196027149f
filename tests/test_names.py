"""One plugin mechanism: ``Registry.create`` with one option check for every kind of plugin, and every
registry complete on its first lookup whatever was imported before it."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import zoo
from tests.conftest import REPO
from zoo._names import OptionTypeError, Registry, accepted_options, check_option_types


def _registry_with(*entries) -> Registry:
    reg = Registry("thing")
    for name, entry in entries:
        reg.add(name, entry)
    return reg


class Pair:
    def __init__(self, a: int, b: float = 1.0, flag: bool = False) -> None:
        self.a, self.b, self.flag = a, b, flag


class Scaled(Pair):
    def __init__(self, a: int, scale: float = 2.0, **rest) -> None:
        super().__init__(a, **rest)
        self.scale = scale


def widened(model, beta: "float | list" = 2.0, strict: bool = True) -> tuple:
    return model, beta, strict


def test_create_checks_names_types_and_required_options_then_makes_the_plugin():
    reg = _registry_with(("pair", Pair), ("scaled", Scaled), ("widened", widened))
    assert reg.create("scaled", a=1, b=3, flag=True).b == 3  # options of the bases, through **rest
    assert accepted_options(Scaled) == {"a": accepted_options(Pair)["a"], "scale": 2.0, "b": 1.0, "flag": False}
    assert reg.create("widened", "m", beta=[1, 2]) == ("m", [1, 2], True)  # inputs positional; beta widened
    with pytest.raises(TypeError, match=r"thing 'pair' got unexpected option\(s\) 'scale' \(an option of scaled\)"):
        reg.create("pair", a=1, scale=3.0)
    with pytest.raises(TypeError, match=r"'flg' \(did you mean 'flag'\?\)"):
        reg.create("pair", a=1, flg=True)
    with pytest.raises(OptionTypeError, match="thing 'pair': option flag must be true or false, got 'no'"):
        reg.create("pair", a=1, flag="no")
    with pytest.raises(ValueError, match="option b must be a number, got True"):  # OptionTypeError is both
        reg.create("pair", a=1, b=True)
    with pytest.raises(TypeError, match="thing 'pair' needs option\\(s\\) a"):
        reg.create("pair", b=2.0)


def test_the_type_rule():
    accepted = {"n": 2, "x": 0.5, "on": False, "name": "a", "maybe": None}
    check_option_types("t", {"n": 3, "x": 1, "on": True, "name": 5, "maybe": 1.5, "n2": None}, accepted)
    for bad in ({"n": 2.0}, {"x": "1"}, {"on": 1}, {"on": None}, {"n": False}):
        with pytest.raises(OptionTypeError):
            check_option_types("t", bad, accepted)
    check_option_types("t", {"x": [1.0]}, accepted, widened=["x"])


@pytest.mark.parametrize("call, owner", [
    (lambda: zoo.build("gat", in_dim=2, out_dim=2, slope=0.1), "model 'gat'"),
    (lambda: zoo.build("gat", in_dim=2, out_dim=2, init="bal_o", init_kwargs={"bta": 1.0}), "init 'balanced_orthogonal'"),
    (lambda: zoo.build("gat", in_dim=2, out_dim=2, norm="pairnorm", norm_kwargs={"alpha": 1.0}), "norm 'pairnorm'"),
    (lambda: zoo.datasets.transforms.make_transform(("missing_features", {"q": 0.5}), 0), "transform 'missing_features'"),
    (lambda: zoo.datasets.load("cora", undirectd=True), "dataset 'cora'"),
])
def test_every_kind_of_plugin_refuses_an_option_with_the_same_line(call, owner):
    with pytest.raises(TypeError, match=rf"^{owner} got unexpected option\(s\) '\w+'.*\. Valid options: "):
        call()


def test_an_option_of_another_plugin_of_the_kind_is_named():
    with pytest.raises(TypeError, match=r"'alpha' \(an option of lipschitz\)"):
        zoo.build("gat", in_dim=2, out_dim=2, norm="pairnorm", norm_kwargs={"alpha": 1.0})


#: every registry: kind -> (the module that defines it, and may hold entries, its name there)
REGISTRIES = {"model": ("zoo.registry", "MODELS"), "init": ("zoo.inits._registry", "INITS"),
              "norm": ("zoo.norms._registry", "NORMS"), "input encoder": ("zoo.nn.encoders", "INPUT_ENCODERS"),
              "edge encoder": ("zoo.nn.encoders", "EDGE_ENCODERS"), "classifier": ("zoo.nn.heads", "CLASSIFIERS"),
              "readout": ("zoo.nn.readout", "READOUTS"), "transform": ("zoo.datasets.transforms", "TRANSFORMS"),
              "dataset": ("zoo.datasets.registry", "DATASETS")}


def _source(entry) -> str:
    return getattr(getattr(entry, "loader", entry), "__module__", None) or ""


def test_every_registry_imports_the_modules_its_entries_come_from():
    """Complete on the first lookup whatever the import order: every entry comes from the registry's
    own module or from a package the registry imports before its first lookup (``populate``)."""
    for module in ("zoo.models", "zoo.papers", "zoo.inits", "zoo.norms", "zoo.datasets"):
        importlib.import_module(module)
    stray = []
    for kind, (home, attr) in REGISTRIES.items():
        reg = getattr(importlib.import_module(home), attr)
        assert reg.kind == kind
        stray += [f"{kind}: {name} from {_source(reg.get(name))}" for name in reg.names()
                  if not _source(reg.get(name)).startswith((home, *reg.populate))]
    assert stray == []
    defined = {line.split("=")[0].split(":")[0].strip() for p in (REPO / "zoo").rglob("*.py")
               for line in p.read_text().splitlines() if "Registry(" in line and "= Registry" in line}
    assert defined == {attr for _, attr in REGISTRIES.values()}, "a new registry: add it to REGISTRIES"


def test_the_encoder_registry_is_complete_without_importing_the_papers():
    """``zoo.papers`` registers the LipschitzNorm authors' encoder and head: a fresh process that
    imports only the encoders and heads still finds them (it did not before the registries populated)."""
    code = ("from zoo.nn.encoders import INPUT_ENCODERS\nfrom zoo.nn.heads import CLASSIFIERS\n"
            "print(sorted(INPUT_ENCODERS.names()), sorted(CLASSIFIERS.names()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("] [")[0].count("affine") == 1 and "'linear'" in done.stdout.split("] [")[1]
