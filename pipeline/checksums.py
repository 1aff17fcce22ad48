"""The sha256 of a file's bytes: what model manifests, vector-file provenance and WordNet's
provenance record (one reader for all of them)."""
from __future__ import annotations

import hashlib


def file_sha256(path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()
