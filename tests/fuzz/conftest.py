"""The fuzz tests' one campaign (campaign.py): every registered target starts at once, once per session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import campaign
import pytest


@pytest.fixture(scope="session")
def fuzz_campaign() -> Iterator[dict[str, dict[str, Any]]]:
    yield from campaign.campaign()
