"""Fixtures shared by the platform tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from utvm.platform.serial_board.config import ENV_VAR, use_board_config


@pytest.fixture
def no_board_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No board config from the environment or an earlier test, before and after the test."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    use_board_config(None)
    yield
    use_board_config(None)
