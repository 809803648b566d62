"""Operators of the Common AI provider."""
