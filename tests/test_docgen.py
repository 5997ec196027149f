"""Generated model pages (``zoo docs``): equation written once, pages up to date, a check that can fail."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import zoo
from zoo import _docstrings, docgen
from zoo.cli import main
from zoo.cli.docs import stale_pages
from zoo.registry import MODELS, catalogue, constructor_options

REPO = Path(__file__).resolve().parents[1]


def test_model_pages_are_up_to_date():
    """Fails when a docstring or card changed without `zoo docs` (like tests/test_report.py for the report)."""
    stale = stale_pages(REPO)
    assert not stale, f"run `zoo docs` and commit: {sorted(map(str, stale))} are out of date"


def test_every_registered_model_has_a_generated_page():
    pages = docgen.documented_models()
    assert set(pages) == set(MODELS.names())
    for name, rel in pages.items():
        text = (REPO / rel).read_text(encoding="utf-8")
        assert text.count(docgen.BEGIN) == 1 and text.count(docgen.END) == 1, rel


def test_cards_name_layers_instead_of_restating_the_equation():
    for name, card in catalogue().items():
        assert "equation" not in card, f"{name}: the equation belongs in the layer docstring, not registry/*.toml"
        classes = docgen.layer_classes(name)
        assert any(_docstrings.math_blocks(c) for c in classes), f"{name}: no `.. math::` block in {classes}"
        assert any(_docstrings.section(c, "Shapes") for c in classes), f"{name}: no Shapes section in {classes}"
        assert zoo.model_card(name).equation == _docstrings.equation_text(classes)


def test_the_gat_equation_is_written_once():
    score = r"a_s^\top W h_u + a_t^\top W h_v\big)"   # GAT's score, closing where GAT's ends
    sources = [*(REPO / "zoo").rglob("*.py"), *(REPO / "registry").glob("*.toml")]
    hits = [p for p in sources for _ in range(p.read_text(encoding="utf-8").count(score))]
    assert [p.relative_to(REPO).as_posix() for p in hits] == ["zoo/models/gat.py"]
    page = (REPO / "docs/models/gat.md").read_text(encoding="utf-8")
    assert score in page and "LeakyReLU" in zoo.model_card("gat").equation


def test_every_model_specific_option_has_a_meaning():
    for name in MODELS.names():
        model, classes = MODELS.get(name), docgen.layer_classes(name)
        block = docgen.render_block(name)
        meanings = docgen.option_meanings(model, classes)
        shared = constructor_options(docgen.DeepGNN) if issubclass(model, docgen.DeepGNN) else {}
        for option in constructor_options(model):
            if option not in shared:
                assert meanings.get(option), f"{name}: option {option!r} has no `Args:` entry in a docstring"
                assert f"| `{option}` |" in block


def test_stale_page_is_reported_and_rewritten_keeping_the_prose(tmp_path, capsys):
    shutil.copytree(REPO / "docs" / "models", tmp_path / "docs" / "models")
    page = tmp_path / "docs/models/gat.md"
    text = page.read_text(encoding="utf-8")
    start, end = text.index(docgen.BEGIN), text.index(docgen.END)
    page.write_text(text[:start] + docgen.BEGIN + "\nold equation\n" + text[end:] + "\nHand-written tail.\n",
                    encoding="utf-8")
    assert main(["docs", "--root", str(tmp_path), "--check"]) == 1
    assert "gat.md" in capsys.readouterr().err
    assert "old equation" in page.read_text(encoding="utf-8")      # --check writes nothing
    assert main(["docs", "--root", str(tmp_path)]) == 0
    new = page.read_text(encoding="utf-8")
    assert "old equation" not in new and new.endswith("\nHand-written tail.\n") and text[:start] in new
    assert main(["docs", "--root", str(tmp_path), "--check"]) == 0


def test_page_without_markers_is_one_clear_error(tmp_path, capsys):
    shutil.copytree(REPO / "docs" / "models", tmp_path / "docs" / "models")
    (tmp_path / "docs/models/gcn.md").write_text("# gcn\n", encoding="utf-8")
    assert main(["docs", "--root", str(tmp_path), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'gcn'" in err and "markers" in err
    with pytest.raises(docgen.StalePageError):
        docgen.render_page("# gcn\n", "gcn")


class _Toy:
    r"""One toy layer.

    .. math::
        y = W x

        z = y + b

    after the math.

    Args:
        a, b: the first
            two options.
        c: the third.

    Shapes:
        x: ``(N, F)`` -> ``(N, C)``.
    """


def test_docstring_sections_are_read_in_pieces():
    assert _docstrings.math_blocks(_Toy) == ["y = W x\n\nz = y + b"]
    assert _docstrings.section(_Toy, "Shapes") == "x: ``(N, F)`` -> ``(N, C)``."
    assert _docstrings.section(_Toy, "Returns") == ""
    assert _docstrings.arguments(_Toy) == {"a": "the first two options.", "b": "the first two options.",
                                          "c": "the third."}
    assert _docstrings.equation_text([_Toy]) == "y = W x z = y + b"
    parts = docgen._docstring_parts(_Toy)
    assert parts == ["One toy layer.", "```math\ny = W x\n```", "```math\nz = y + b\n```", "after the math."]
    with pytest.raises(LookupError, match="no class"):
        _docstrings.resolve("zoo.models.gat.NoSuchLayer")
