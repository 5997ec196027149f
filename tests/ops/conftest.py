"""Fixtures for the edge-operation tests."""
import pytest


@pytest.fixture
def torch_op_kernels(monkeypatch):
    """The torch-op fused kernels' own rules and numbers: the compiled attention (which the dispatch
    prefers where it serves; tests/ops/compiled) switched off with ZOO_KERNELS=off."""
    monkeypatch.setenv("ZOO_KERNELS", "off")
