"""Task decorators of the Common AI provider."""
