"""The reliability tests reuse the bot tests' running world (the real PTB Application polling
the Bot API stand-in, on the real Redis and Postgres): the same fixtures, imported here."""

from tests.bot.conftest import (  # noqa: F401 - fixtures are found by name
    bot_database_url,
    bot_queue,
    clean_slate,
    world,
)
