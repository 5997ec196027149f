"""The rule for the papers' findings: each quote is the paper's own text, and each
check holds on the paper's own numbers wherever the suite stores them.

* every quote is found verbatim in ``../shared/papers/<paper>.md`` (whitespace ignored; a sentence
  the text extraction splits is two excerpts joined by ``[...]``); a quote from anywhere else
  (our docs, a paraphrase) is refused;
* a finding's check, run on the paper's stored numbers, holds wherever those numbers exist: a
  check stricter than the paper's own tables is not the paper's claim.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import papers_dir
from zoo.bench.report import findings as fd
from zoo.bench.report import shipped
from zoo.bench.suite.papers import PAPERS

SHIPPED = shipped.suites()
WITH_FINDINGS = sorted(name for name, s in SHIPPED.items() if s["findings"])


def _papers() -> dict:
    return {p.stem: p.read_text() for p in sorted(papers_dir().glob("*.md"))}


def test_quote_matching_ignores_whitespace_and_joins_excerpts():
    text = "Figure 6 highlights that models initialized with balanced parameters, Bal_O , consistently\nachieve"
    assert fd.quote_in_text("parameters, Bal_O, consistently achieve", text)
    assert fd.quote_in_text("Figure 6 highlights [...] Bal_O , consistently", text)
    assert not fd.quote_in_text("Figure 6 shows [...] Bal_O", text)
    assert not fd.quote_in_text("   ", text)


def test_a_quote_from_our_own_docs_is_refused():
    papers = _papers()
    ours = "At L = 2 both inits train; at L = 10 Xavier stays at chance and Bal_O trains."  # docs/benchmarks.md
    assert not any(fd.quote_in_text(ours, t) for t in papers.values())


@pytest.mark.parametrize("name", WITH_FINDINGS)
def test_every_quote_is_the_papers_text(name):
    papers = _papers()
    paper = SHIPPED[name]["meta"].get("paper")
    if paper in PAPERS and paper not in papers:  # a known paper whose text this machine lacks
        pytest.skip(f"{name}: the text of {paper!r} is not in {papers_dir()}; add {paper}.md there to check its quotes")
    # a suite of one paper: its text; the quick suite names two papers: either
    texts = [papers[paper]] if paper in papers else list(papers.values())
    bad = [f.id for f in SHIPPED[name]["findings"] if not any(fd.quote_in_text(f.quote, t) for t in texts)]
    assert not bad, f"{name}: quote(s) of {bad} are not found verbatim in {papers_dir()} ({paper})"


@pytest.mark.parametrize("name", WITH_FINDINGS)
def test_every_check_holds_on_the_papers_own_numbers(name):
    s = SHIPPED[name]
    full, _ = shipped.skeleton(str(s["path"]), Path(s["path"]).stat().st_mtime_ns)
    for r in fd.evaluate(s["findings"], full, {}, s["reported"]):
        if r.paper is not None:
            failing = [f"{c.label}: {c.text}" for c in r.paper_comparisons if c.verdict not in (fd.HOLDS, fd.HOLDS_SIG)]
            assert r.paper in (fd.HOLDS, fd.HOLDS_SIG), f"{name} {r.finding.id}: {r.paper} on the paper's numbers: {failing}"
