"""Optimization passes, one per module."""
