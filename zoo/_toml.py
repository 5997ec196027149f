"""The TOML reader: ``tomllib`` (Python >= 3.11) or its backport ``tomli`` (a leaf module).

>>> from zoo._toml import tomllib
"""
try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["tomllib"]
