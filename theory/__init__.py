"""Closed-form bounds and timing models for data echoing (pure NumPy)."""
