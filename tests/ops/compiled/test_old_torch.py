"""On a torch without torch.library.register_fake (torch < 2.4, e.g. the DGL environment's 2.2) the
compiled attention reports "not available" instead of raising (the plain ops serve every device)."""
from __future__ import annotations

import pytest
import torch

from zoo.ops._compiled import ops, rules


@pytest.mark.parametrize("missing", ["register_fake", "custom_op"])
def test_a_torch_without_the_registration_api_reports_not_available(monkeypatch, missing):
    monkeypatch.delattr(torch.library, missing, raising=False)
    assert f"has no torch.library.{missing}" in rules.unavailable_reason()
    assert ops.backend(torch.device("cpu")) is None
    assert not ops.available(torch.device("cpu")) and not ops.available(torch.device("cuda"))
    with pytest.raises(rules.RulesUnavailable, match=r"torch >= 2.4"):
        rules.register("zoo_test_old_torch")


def test_this_torch_has_the_registration_api():
    assert rules.unavailable_reason() is None
