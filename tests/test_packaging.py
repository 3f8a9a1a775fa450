# Charter: what the built package carries besides code: the PEP 561 marker, so type checkers read
# jetstream_sync's own annotations, is in the package and named as package data in setup.cfg.
from __future__ import annotations

import configparser
from pathlib import Path

import jetstream_sync

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_ships_its_py_typed_marker():
    assert (Path(jetstream_sync.__file__).parent / "py.typed").is_file()
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "py.typed" in cfg.get("options.package_data", "jetstream_sync").split()
