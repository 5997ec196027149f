"""Conservation-law and trainability diagnostics (balance paper). Placeholder until written."""
__all__: list = []
