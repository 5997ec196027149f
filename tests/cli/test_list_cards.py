"""``zoo list inits|norms|models`` prints one line per plugin with its card."""
from __future__ import annotations

import zoo.cli


# the plugins of the field since 2024 (docs/beyond.md), each with a word of its card
FIELD_PLUGINS = (("inits", "spoginit", "Wang et al."), ("inits", "g_init", "Kelesis et al."),
                 ("inits", "large_variance", "Epping et al."), ("norms", "graphnorm_v2", "Scholkemper"),
                 ("norms", "batchnorm", "BatchNorm"), ("models", "faf_mlp", "Fixed Aggregation Features"),
                 ("models", "polynormer", "Deng"), ("models", "sgformer", "Wu"))


def test_one_section_lists_each_plugin_with_its_card(capsys):
    for section, name, words in FIELD_PLUGINS:
        assert zoo.cli.main(["list", section]) == 0
        lines = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith(name)]
        assert len(lines) == 1 and words in lines[0], (section, lines)
