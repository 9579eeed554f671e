"""Run the Bot API stand-in on its own: `python -m codemojex.standin --port 8081`.

Point a bot at it with CODEMOJEX_BOT_API_BASE_URL=http://127.0.0.1:8081/bot and drive it
through the control API (see codemojex/standin/control.py), e.g.
`curl -d '{"user_id": 1, "first_name": "Ann"}' http://127.0.0.1:8081/_standin/add_user`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from codemojex.standin.server import StandIn


async def serve(args: argparse.Namespace) -> None:
    standin = StandIn(
        token=args.token, host=args.host, port=args.port, privacy_mode=args.privacy_mode
    )
    await standin.start()
    if args.limits:
        standin.enforce_rate_limits(global_per_s=args.bot_per_s, chat_burst=args.chat_burst)
    print(f"Bot API stand-in on {standin.base_url} (token {standin.token})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await standin.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m codemojex.standin")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--token", default="123:TEST")
    parser.add_argument("--privacy-mode", action="store_true")
    parser.add_argument(
        "--limits", action="store_true", help="enforce Telegram's flood limits (429 past them)"
    )
    parser.add_argument(
        "--bot-per-s", type=int, default=30, help="with --limits: the hidden bot-wide limit"
    )
    parser.add_argument(
        "--chat-burst", type=int, default=1, help="with --limits: posts a chat may make at once"
    )
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
