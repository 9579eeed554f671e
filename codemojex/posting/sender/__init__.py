"""The outbox sender: posts what the game decided, paced, coalesced, at least once.

Read in this order, each a sitting:

- `loop.py` `OutboxSender`: which chat posts next (the posting ring, the outbox scan, the
  chats in hand);
- `turn.py` `Turns`: one chat's turn (its rows claimed, a pace slot, what landed meanwhile
  riding along, folded into one message, posted through the fence);
- `delivery.py` `Delivery`: the rows' claim, the chat lease's fence, the delivery markers and
  the ambiguous-delivery rule;
- `telegram.py` `Poster`: the Telegram call and what its answer means (an `Outcome`);
- `stats.py` `SenderStats`: what it counts.

The pace, and folding instead of holding
    Before each post the sender takes a slot from the shared `Pacer` (Redis): one message a
    second per chat, a group's twenty a minute spread three seconds apart, thirty a second for
    the bot, for all processes together. A chat whose own pace does not allow a post yet is
    handed back to the ring with its turn at the moment it does (it holds no rows and no task
    meanwhile); a chat waiting only for the bot's second waits in hand, one at a time per
    sender, first come first served. Everything waiting for the chat when its turn comes goes
    into that one message (fold.py): a quiet room gets a reply to the guess, a busy one one
    message with every result in it, instead of each result waiting for a slot of its own.

What is guaranteed (at least once by default, with one narrow window for a duplicate)
    - A row is marked sent only after Telegram accepted the message that carried it (or,
      under "assume_sent", after a post that may have gone out: delivery.py).
    - A row with a "posted" marker is marked sent without posting it again (a crash or a
      database outage between the post and `mark_sent` does not re-post); a row with only an
      "intent" marker is ambiguous and goes by the `ambiguous` rule (delivery.py).
    - So a row is posted twice only if (a) the process dies in the instant between Telegram
      accepting the post and the posted-marker write (a few milliseconds: an HTTP answer and
      one Redis round trip), or (b) the answer itself is lost (a read timeout, or the
      connection dropped after the request went out) although Telegram carried the post out.
      Both are decided by the same rule; under "assume_sent" neither reposts. A refused
      connection, a connect or pool timeout, or an error answer are known not to have posted:
      the intent marker is withdrawn and the rows retried; a 429 (RetryAfter) is a refusal
      too, the rows stay unsent and go out after the wait (telegram.py). The soak harness
      (`bench/soak.py`) checks that every double post it sees has a worker SIGKILL within a
      second of its first copy.
    - Two senders never post the same row: the chat lease keeps them off the same chat, and
      the database claim keeps them off the same rows even if the lease were lost; a sender
      posts only after re-checking (and renewing) its chat lease, and never waits for a slot
      longer than half its row claim.
    - A row Telegram refuses for good (the bot was kicked, the chat is gone, the text is
      refused: BadRequest, Forbidden, ChatMigrated) is marked done with no message id
      (`sent_message_id` NULL) and counted as failed, instead of being retried forever.
    - An outage of Redis or the database (`codemojex.outages`) is waited out and logged as
      one warning line; any other failure is a bug and is logged with its traceback. What a
      turn goes on without (a marker not deleted, rows not handed back early) is logged and
      counted (`OUTAGES.swallow`, codemojex_swallowed_total).
"""

from codemojex.posting.sender.loop import OutboxSender
from codemojex.posting.sender.stats import SenderStats
from codemojex.posting.sender.telegram import Outcome, maybe_delivered, post

__all__ = ["OutboxSender", "Outcome", "SenderStats", "maybe_delivered", "post"]
