"""Stop sequences over streamed text: held back while they might still match, cut at a match."""

from app.engine.server.core.stop_strings import StopScanner


def test_text_is_released_once_it_cannot_start_a_stop_sequence() -> None:
    scanner = StopScanner(("END",))
    assert scanner.feed("hello E") == "hello "  # "E" could begin "END"
    assert scanner.feed("X") == "EX"
    assert scanner.feed("tail") == "tail"
    assert scanner.flush() == "" and not scanner.stopped


def test_a_stop_split_across_chunks_cuts_the_text_before_it() -> None:
    scanner = StopScanner(("\n\n", "STOP"))
    assert scanner.feed("one\n") == "one"
    assert scanner.feed("\ntwo") == ""
    assert scanner.stopped and scanner.feed("more") == "" and scanner.flush() == ""


def test_the_earliest_of_several_stops_wins() -> None:
    scanner = StopScanner(("cd", "b"))
    assert scanner.feed("abcd") == "a" and scanner.matched == "b"


def test_six_stops_are_watched_and_the_one_found_is_named() -> None:
    stops = ("\n\n", "<|im_end|>", "User:", "###", "```", "END")
    scanner = StopScanner(stops)
    assert scanner.feed("an answer ``") == "an answer "
    assert scanner.feed("` and more") == ""
    assert scanner.matched == "```"


def test_held_text_is_flushed_at_the_end() -> None:
    scanner = StopScanner(("END",))
    assert scanner.feed("the EN") == "the "
    assert scanner.flush() == "EN"
