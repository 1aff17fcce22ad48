"""The distribution lists every package folder of the checkout (a folder missing from
pyproject.toml's [tool.setuptools] packages is left out of the wheel, and the installed package
fails to import: kernels/maps once was)."""
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_in_the_distribution():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = cfg["package-dir"]
    listed = set(cfg["packages"])
    on_disk = set()
    for top, name in (("kernels", "gramtile.kernels"), ("pipeline", "gramtile.pipeline"),
                      ("workflows", "gramtile.workflows"), ("gramtile", "gramtile")):
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / top)
            on_disk.add(".".join([name, *rel.parts]))
    assert on_disk - listed == set(), f"package folders missing from pyproject.toml: {sorted(on_disk - listed)}"
    for pkg, folder in dirs.items():  # and each mapped package is a package folder
        assert pkg in listed and (REPO / folder / "__init__.py").is_file(), (pkg, folder)
