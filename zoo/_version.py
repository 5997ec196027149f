"""The package version, in a leaf module: code that records it (checkpoints) need not import ``zoo``."""
__version__ = "0.1.0"
