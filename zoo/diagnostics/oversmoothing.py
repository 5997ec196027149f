"""Oversmoothing diagnostics (nonlocal-MP paper). Placeholder until written."""
__all__: list = []
