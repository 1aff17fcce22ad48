"""Slow, obviously correct kernels used as references by the tests (never by the package)."""
