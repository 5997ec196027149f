"""Benchmark suites as data (installed as ``zoo._suites``): one TOML file per suite, paper numbers in reported/."""
