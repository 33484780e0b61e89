"""Package discovery for the layout where the repository root is the `redline` package.

pyproject.toml maps `redline` onto this directory; setuptools' own discovery would name the
subpackages `commands`, `evaluator`, ... as top-level packages, so they are found here and given
the `redline.` prefix. Every directory with an `__init__.py` below the root is shipped, except the
test suite's fixtures. This file sits in the root package's directory, so it is kept out of it.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

EXCLUDED = ["tests", "tests.*", "build", "build.*", "vscode-extension", "vscode-extension.*"]


class BuildPy(build_py):
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [entry for entry in modules if (entry[0], entry[1]) != ("redline", "setup")]


setup(
    packages=["redline", *(f"redline.{name}" for name in find_packages(".", exclude=EXCLUDED))],
    cmdclass={"build_py": BuildPy},
)
