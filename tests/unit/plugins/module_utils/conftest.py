"""Fixtures for the patch engine tests: the shipped mods and real releases from PyPI."""
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[4]
ENGINE = ROOT / "plugins" / "module_utils" / "_source_patch.py"
CACHE = ROOT / ".cache" / "real-packages"


def pytest_configure(config):
    config.addinivalue_line("markers", "real_packages: installs real releases from PyPI (cached under .cache/real-packages)")


@pytest.fixture(scope="session")
def shipped_mods():
    """The mods the role ships, by name (the tests exercise exactly these)."""
    defaults = yaml.safe_load((ROOT / "roles" / "mods" / "defaults" / "main.yml").read_text())
    return {m["name"]: m for m in defaults["mods_definitions"]}


def install(*requirements):
    """pip install --target a cached directory (one per requirement set); return its path."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    target = CACHE / key
    if (target / ".complete").exists():
        return target
    partial = CACHE / (key + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "--no-input", "--target", str(partial), *requirements],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.fail(f"pip install {' '.join(requirements)} failed (PyPI reachable? PIP_CERT set?):\n{res.stderr[-3000:]}")
    (partial / ".complete").write_text("\n".join(requirements) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


class Site:
    """A private copy of an installed package set, run by a fresh Python like an image's own."""

    def __init__(self, path):
        self.path = path

    def run(self, *argv, check=True):
        env = dict(os.environ, PYTHONPATH=str(self.path), PYTHONDONTWRITEBYTECODE="1")
        res = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, check=False)
        if check and res.returncode != 0:
            pytest.fail(f"{argv} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        return res

    def file(self, relative):
        return self.path / relative


@pytest.fixture
def site_factory(tmp_path):
    def make(*requirements):
        dest = tmp_path / "site"
        shutil.copytree(install(*requirements), dest, ignore=shutil.ignore_patterns("__pycache__", ".complete"))
        return Site(dest)
    return make
