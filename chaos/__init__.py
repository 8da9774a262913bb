"""Crash-point registry and fault injection for the chaos suite."""
