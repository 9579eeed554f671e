"""The one thing pyproject.toml cannot say: `migrations/` stays at the repository root, where
alembic.ini and developers expect it, and ships inside the package as `codemojex.migrations`
(its revisions as package data), so that `codemojex migrate` works from any install."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["codemojex", "codemojex.*"]), "codemojex.migrations"],
    package_dir={"codemojex.migrations": "migrations"},
)
