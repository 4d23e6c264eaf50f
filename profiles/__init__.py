"""Bundled hardware profiles (YAML files beside this module)."""
