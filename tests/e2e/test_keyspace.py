"""No key outlives its use: after a real run (the bot and the worker around the stand-in: a
group round played typed and tapped, admin commands, a daily in a private chat, the players'
commands), the queue's keyspace is walked and every key's time to live read. A key without one
is the lanes' own state (`emq:{q}:`, docs/lanes.md: bounded by the lanes' retention, not by a
clock) or one of the few documented in docs/architecture.md ("Keys and how long they live");
every other key expires within an hour, or within what that table says and why."""

from __future__ import annotations

import re

from codemojex.game import taps
from codemojex.lanes.keys import Keys as LaneKeys
from tests.e2e.harness import ADMIN, ALICE, BOB, DAVE, ROOT, Stack, in_process_worker
from tests.helpers.support import wrong_guess
from tests.reliability.keyspace import queue_keys, stray_keys

HOUR = 3600

# The cmx: keys that live past an hour or for ever, by their shape in docs/architecture.md's
# table, with the most seconds they may live (None: no time to live). Every other key expires
# within an hour.
LASTING: dict[str, int | None] = {
    "send:ring": None,  # chats with unsent rows: a chat leaves it when its rows are sent
    "send:dirty": None,  # chats given rows while a sender held them: emptied by the sender
    "ops:procs": None,  # the processes publishing: each leaves it when it stops or goes stale
    "send:posted:<row>": 7 * 24 * HOUR,  # the message id a row went out in: a restart's guard
    "daily:board:<day>": 3 * 24 * HOUR,  # the day's world board: read until the day is over
    "daily:played:<day>": 3 * 24 * HOUR,
    "daily:built:<day>": 3 * 24 * HOUR,
    "members:<chat>": 30 * 24 * HOUR,  # whom the bot saw in a group: its daily board's members
    "inbox:parked": None,  # the bot's parked updates: each leaves once finished
    "inbox:where": None,
    "inbox:key:<key>": None,
    "inbox:held:<holder>": None,
    "inbox:holders": None,  # the processes holding parked updates: each leaves when it stops
    "inbox:fences": None,
    "inbox:dead": 14 * 24 * HOUR,  # the dead letters, for the operator
    "poller:<bot>:fence": 30 * 24 * HOUR,  # the number of the poller lease's last holder
    "pace:b:<bot>:rate": 7 * 24 * HOUR,  # the bot's learned rate: a restart keeps it
}


def shape(key: str, queue: str) -> str:
    """A cmx key's shape: its ids and numbers replaced by the placeholders the doc uses."""
    rest = key.removeprefix(f"cmx:{{{queue}}}:")
    rest = re.sub(r"^send:(posted|sending|lease):-?\d+$", r"send:\1:<row>", rest)
    rest = re.sub(r"^daily:(\w+):\d{8}$", r"daily:\1:<day>", rest)
    rest = re.sub(r"^members:-\d+$", "members:<chat>", rest)
    rest = re.sub(r"^poller:\d+(:fence)?$", r"poller:<bot>\1", rest)
    rest = re.sub(r"^inbox:key:[a-z]+(:-?\d+)+$", "inbox:key:<key>", rest)
    rest = re.sub(r"^inbox:held:([0-9a-f]{16}|-)$", "inbox:held:<holder>", rest)
    rest = re.sub(r"^pace:b:\d+:rate$", "pace:b:<bot>:rate", rest)
    return rest


def documented() -> str:
    return (ROOT / "docs" / "architecture.md").read_text()


def test_every_lasting_key_is_documented() -> None:
    text = documented()
    for name in LASTING:
        assert f"`cmx:{{q}}:{name}`" in text, name


async def play_everything(stack: Stack) -> None:
    chat = stack.new_group()
    ann, rnd = await stack.new_round(chat, by=ALICE)
    secret = rnd.secret_emojis
    for n, user in enumerate((ALICE, BOB)):
        guess = "".join(wrong_guess(secret, ann.palette, n))
        mid = stack.standin.send_text(chat, user, guess)
        await stack.result(chat, mid, "Alice" if user == ALICE else "Bob", guess)
    # A tapped guess: a draft, then the completing tap.
    buttons = dict((text, data) for text, data in stack.buttons(chat, ann.message_id))
    tapped = wrong_guess(secret, ann.palette, 5)
    for emoji in tapped:
        await stack.tap(chat, ann.message_id, DAVE, buttons[emoji])
    await stack.result(chat, -1, "Dave", "".join(tapped))
    first = stack.standin.send_text(chat, ALICE, "".join(wrong_guess(secret, ann.palette, 7)))
    await stack.settle()
    for command in ("/pause", "/resume", "/limit 3", "/queue", "/settings length=5"):
        stack.standin.send_text(chat, ADMIN, command)
    for command in ("/weight 2", "/ban", "/unban"):
        stack.standin.send_text(chat, ADMIN, command, reply_to=first)
    for command in ("/stats", "/top", "/help", "/rules"):
        stack.standin.send_text(chat, BOB, command)
    await stack.settle()
    # Bob wins: the round's keyboard goes, its cards close.
    win = stack.standin.send_text(chat, BOB, "".join(secret))
    await stack.result(chat, win, "Bob", "".join(secret))
    # A daily in a private chat: opened, one guess typed.
    stack.standin.send_private(ALICE, "/daily")
    post = await stack.standin.wait_for_sent(
        lambda m: m.text.startswith("📅 Daily #"), 15, chat_id=ALICE
    )
    (line,) = [ln for ln in post.text.splitlines() if ln.startswith("Palette: ")]
    palette = tuple(line.removeprefix("Palette: ").split(" "))
    guess = "".join(palette[:4])
    mid = stack.standin.send_private(ALICE, guess)
    await stack.result(ALICE, mid, "Alice", guess)
    stack.standin.send_private(BOB, "/daily")
    # A second group whose players guess after its card's last write: their seats and names
    # are added by the guesses' admission alone.
    other = stack.new_group()
    ann2, rnd2 = await stack.new_round(other, by=DAVE)
    guess2 = "".join(wrong_guess(rnd2.secret_emojis, ann2.palette, 1))
    mid2 = stack.standin.send_text(other, DAVE, guess2)
    await stack.result(other, mid2, "Dave", guess2)
    await stack.settle()
    await stack.all_posted()
    assert taps.parse_tap(buttons[ann.palette[0]]) is not None


async def test_after_a_run_every_key_expires_but_the_lanes_and_the_documented(
    stack: Stack,
) -> None:
    async with in_process_worker(stack):
        await play_everything(stack)
    queue = stack.settings.queue
    keys = await queue_keys(stack.redis, queue)
    assert stray_keys(keys, queue) == []
    lanes = LaneKeys(queue)
    wrong: list[str] = []
    seen: set[str] = set()
    for key in keys:
        # In ms: TTL rounds to the nearest second, so a key with under half a second left
        # would read 0, as if it had none.
        ms = await stack.redis.pttl(key)
        if ms == -2:
            continue  # gone since the walk began
        ttl = ms if ms < 0 else max(1, ms // 1000)
        if key.startswith("emq:"):
            kind, _ = lanes.parse(key)
            # The lanes' own state lasts as long as the lanes keep it; only a producer's
            # dedupe key (none from the bot: its job ids dedupe) has a time to live.
            if kind == "dedupe" and not 0 < ttl <= HOUR:
                wrong.append(f"{key}: {ttl}")
            continue
        name = shape(key, queue)
        seen.add(name)
        if name in LASTING:
            most = LASTING[name]
            if (most is None and ttl != -1) or (most is not None and not 0 < ttl <= most):
                wrong.append(f"{key}: {ttl} (documented: {most}, {name})")
        elif not 0 < ttl <= HOUR:
            wrong.append(f"{key}: {ttl} ({name})")
    assert wrong == [], "\n".join(wrong)
    # The run reached the keys this test is about.
    assert any(name.startswith("card:") and name.endswith(":seats") for name in seen), seen
    assert any(name.endswith(":names") for name in seen), seen
    assert any(name.startswith("daily:played:") for name in seen), seen
