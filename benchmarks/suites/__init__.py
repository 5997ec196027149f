"""Declarative benchmark suites (TOML), installed as ``zoo._suites``."""
