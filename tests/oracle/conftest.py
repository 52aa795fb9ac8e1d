"""The oracle's datasets, opened on first use and shared by the tests of a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oracle.harness import Dataset, open_dataset


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Dataset]]:
    root = tmp_path_factory.mktemp("answer-oracle")
    opened: dict[str, Dataset] = {}

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, name: str) -> Dataset:
            opened[name] = open_dataset(name, root)
            return opened[name]

    yield Lazy()
    for ds in opened.values():
        ds.close()
