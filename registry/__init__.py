"""The model catalogue as data (installed as ``zoo._catalogue``): one TOML file per family."""
