"""The one packaging step pyproject.toml cannot say: the repository's matrices/ (the validated sets,
compatibility data and baselines; kept once, in matrices/) is copied into the built package as
clusterdef/bundled_matrices/, where clusterdef.matrix.load.bundled_matrices finds it in an installed wheel.
A source checkout or an editable install reads matrices/ in place."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

MATRICES = Path(__file__).resolve().parent / "matrices"


class BuildPy(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads matrices/ from the checkout
        dest = Path(self.build_lib) / "clusterdef" / "bundled_matrices"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(MATRICES, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildPy})
