"""The connections a process keeps are settings (CODEMOJEX_DB_POOL_SIZE, _OVERFLOW): what the
engines of the worker, the ops page and the bot are built with, bounded, and the budget in
docs/operations.md is the defaults' sum."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from sqlalchemy.pool import QueuePool

from codemojex.db.engine import DB_POOL_OVERFLOW, DB_POOL_SIZE
from codemojex.runtime import open_runtime
from codemojex.settings import Settings
from tests.helpers.support import ROOT


def _pool(pool: object) -> tuple[int, int]:
    assert isinstance(pool, QueuePool)
    return pool.size(), pool._max_overflow


async def test_the_pool_settings_size_a_processs_engine(migrated_pg_url: str) -> None:
    settings = Settings(database_url=migrated_pg_url, db_pool_size=3, db_pool_overflow=1)
    async with open_runtime(settings.runtime()) as rt:
        assert _pool(rt.engine.pool) == (3, 1)
    async with open_runtime(Settings(database_url=migrated_pg_url).runtime()) as rt:
        assert _pool(rt.engine.pool) == (DB_POOL_SIZE, DB_POOL_OVERFLOW)


@pytest.mark.parametrize("field", ["db_pool_size", "db_pool_overflow"])
def test_a_pool_setting_out_of_its_range_is_refused(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings.model_validate({field: -1})


def test_the_connections_budget_is_the_defaults_sum() -> None:
    """docs/operations.md's budget: a process holds at most size + overflow."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("### Connections") :]
    section = section[: section.index("\n## ")]
    per_process = DB_POOL_SIZE + DB_POOL_OVERFLOW
    assert f"**{per_process}**" in section
    assert re.search(rf"{per_process} × \(N \+ M \+ S \+ 1\)", section), section
