"""Auto depth is what a user gets without choosing: in the CLI, the chat window and saved chats."""

from __future__ import annotations

from app.cli import build_parser
from app.engine.chat.conversation import ChatSettings, reply_request
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH

BRIEF = {"system_prompt": "Be brief."}  # a request needs some context


def test_the_default_depth_is_auto() -> None:
    assert DEFAULT_MTP_DEPTH == AUTO
    args = build_parser("chat").parse_args(["chat", "--prompt", "hi"])
    assert args.mtp_depth == AUTO
    assert ChatSettings().mtp_depth == AUTO


def test_a_chat_reply_request_follows_the_depth_setting() -> None:
    auto = reply_request(ChatSettings(**BRIEF), ())
    assert auto.adaptive_depth and auto.mtp_depth == AUTO_MAX_DEPTH
    fixed = reply_request(ChatSettings(**BRIEF, mtp_depth=2), ())
    assert not fixed.adaptive_depth and fixed.mtp_depth == 2
    off = reply_request(ChatSettings(**BRIEF, mtp_enabled=False), ())
    assert not off.adaptive_depth and off.mtp_depth == 0
    plain = reply_request(ChatSettings(**BRIEF), (), mtp_depth=0)  # compare mode's plain side
    assert not plain.adaptive_depth and plain.mtp_depth == 0


def test_saved_settings_keep_auto_or_a_valid_fixed_depth() -> None:
    assert ChatSettings.from_dict(ChatSettings().to_dict()).mtp_depth == AUTO
    assert ChatSettings.from_dict({"mtp_depth": 3}).mtp_depth == 3  # a chat saved before auto
    assert ChatSettings.from_dict({"mtp_depth": 99}).mtp_depth == MAX_DRAFT_DEPTH
    assert ChatSettings.from_dict({"mtp_depth": "deep"}).mtp_depth == DEFAULT_MTP_DEPTH
