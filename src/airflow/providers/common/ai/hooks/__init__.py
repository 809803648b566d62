"""Hooks of the Common AI provider."""
