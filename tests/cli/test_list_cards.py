"""``zoo list inits|norms|models`` prints one line per plugin with its card."""
from __future__ import annotations

import zoo.cli


def test_one_section_lists_each_plugin_with_its_card(capsys):
    for section, name, words in (("inits", "spoginit", "Wang et al."), ("norms", "graphnorm_v2", "Scholkemper"),
                                 ("models", "faf_mlp", "Fixed Aggregation Features")):
        assert zoo.cli.main(["list", section]) == 0
        lines = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith(name)]
        assert len(lines) == 1 and words in lines[0], (section, lines)
