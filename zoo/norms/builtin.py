"""Imports every norm plugin module so that they register (one import line per plugin)."""
