"""zoo.build: a name (and preset), options checked once, then the init."""
from __future__ import annotations

import pytest

import zoo


def test_build_without_a_name():
    with pytest.raises(TypeError, match="zoo.build needs a model name.*got None"):
        zoo.build(None, in_dim=2, out_dim=2)
