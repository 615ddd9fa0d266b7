"""Fixtures for the api model tests."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture
def manifests_dir() -> Path:
    return DATA / "manifests"


@pytest.fixture
def invalid_dir() -> Path:
    return DATA / "invalid"
