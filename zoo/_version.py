"""The package version, in a leaf module: code that records it (model files) need not import ``zoo``."""
__version__ = "0.1.0"
