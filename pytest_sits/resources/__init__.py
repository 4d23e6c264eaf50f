"""Schemas and templates shipped with the plugin."""
