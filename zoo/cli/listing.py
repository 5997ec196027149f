"""``zoo list [models|inits|norms|datasets|suites]``: the registered plugins, datasets and suites."""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional, Sequence

from zoo.cli.args import add_imports

LISTABLE = ("models", "inits", "norms", "datasets", "suites")


def register(sub: Any) -> None:
    p = sub.add_parser("list", help="list models, inits, norms, datasets or suites")
    p.add_argument("what", nargs="?", choices=LISTABLE, default=None)
    add_imports(p)
    p.set_defaults(handler=run, prog=p.prog)


def run(args: argparse.Namespace) -> int:
    what: Optional[str] = args.what
    if what is None:  # the overview: names only, without importing torch (zoo.cli.plugin_names)
        print(overview())
        return 0
    import zoo

    if what == "datasets":
        from zoo.datasets import format_datasets_table

        print("datasets:\n" + format_datasets_table())
    elif what == "suites":
        print("suites:\n" + suites_table())
    else:
        names = {"models": zoo.list_models, "inits": zoo.list_inits, "norms": zoo.list_norms}[what]()
        # one section asked for: one line per plugin with its card
        print(f"{what}:\n" + "\n".join(f"  {label:<46} {card_line(what, name)}"
                                       for name, label in zip(names, with_aliases(what, names))))
    return 0


def overview() -> str:
    """Every section's names (plugins with their aliases, suites with their titles), read from
    :mod:`zoo.cli.plugin_names` and the suite files: ``zoo list`` imports neither torch nor PyG."""
    from zoo.bench.suite.load import suite_titles
    from zoo.cli.plugin_names import plugin_names

    lines = []
    for section in ("models", "inits", "norms"):
        entries = plugin_names(section)
        lines.append(f"{section}: " + ", ".join(f"{n} ({', '.join(a)})" if a else n for n, a in entries))
    lines.append("datasets: " + ", ".join(n for n, _ in plugin_names("datasets")))
    lines.append("suites:")
    lines += [f"  {name:<22} {title}" for name, title in suite_titles()]
    lines.append("(zoo list datasets: sizes and local availability; zoo list suites: runs and estimated CPU-hours)")
    return "\n".join(lines)


def card_line(section: str, name: str) -> str:
    """A plugin's card in one line: a model card's title and paper; an init's or a norm's docstring's first line."""
    import inspect

    import zoo
    from zoo.bench.suite.plugins import registry

    if section == "models":
        card = zoo.model_card(name)
        return f"{card.title} — {card.paper.split('.')[0]}"
    import re

    doc = inspect.getdoc(registry({"inits": "init", "norms": "norm"}[section]).get(name)) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return re.sub(r"(?::\w+:)?`+([^`]+)`+", r"\1", first)  # plain text: no reST roles or literals


def with_aliases(section: str, names: Sequence[str]) -> List[str]:
    """``balanced_orthogonal (bal_o, balo, ...)``: the short names the README and suites use."""
    from zoo.bench.suite.plugins import registry

    aliases = registry({"models": "model", "inits": "init", "norms": "norm"}[section]).aliases()
    by_name: Dict[str, List[str]] = {}
    for alias, name in aliases.items():
        by_name.setdefault(name, []).append(alias)
    return [f"{n} ({', '.join(sorted(by_name[n]))})" if n in by_name else n for n in names]


def suites_table() -> str:
    """Each suite's runs and estimated CPU time at its full protocol (zoo.bench.plan.cost), in the unit
    that fits it (the quick suite's minutes are not "0.0 CPU-hours")."""
    from zoo.bench.plan import cost, cost_file
    from zoo.bench.plan.estimate import estimate, hours
    from zoo.bench.suite.cells import cell_value
    from zoo.bench.suite.load import list_suites, load_suite

    model, table = cost_file.load_cost_model("cpu"), cost.load_dataset_table()
    lines = []
    for name in list_suites():
        try:
            suite = load_suite(name, validate_models=False)
        except Exception as e:  # a broken suite file is listed, not fatal
            lines.append(f"  {name:<20} (cannot be loaded: {e})")
            continue
        est = estimate(name, suite.mode, suite.groups(), model, table, cell_value, by=())
        lines.append(f"  {name:<20} {len(suite.cells):>5} runs  {hours(est.cpu_seconds):>8} of CPU time")
    return "\n".join(lines) + "\n  (estimated by the cost model fitted on the records' shared 2-core CPU; " \
        "zoo bench SUITE --estimate gives the table per slice)"
