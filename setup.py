"""The build's metadata goes under build/ (setup.cfg's ``[egg_info] egg_base``), which
setuptools requires to exist: everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup

(Path(__file__).resolve().parent / "build").mkdir(exist_ok=True)
setup()
