"""The backend-independent rules of prefix reuse: where a prompt may resume, where checkpoints
go, how prefill batches are cut, and the byte budget over every kept state."""

from __future__ import annotations

from app.engine.runtime.backends.prefix_cache import (
    KeptState,
    KeptStates,
    ResumeOption,
    ResumePlan,
    Session,
    checkpoint_marks,
    chunk_ends,
    common_prefix_length,
    plan_resume,
    resume_point,
)


def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_length([1, 2], [1, 2, 3]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([5], [6]) == 0


def test_a_prompt_that_extends_the_live_state_continues_it() -> None:
    assert resume_point([1, 2, 3], [1, 2, 3, 4, 5], rewindable=False, checkpoints=()) == 3


def test_the_same_prompt_again_keeps_all_but_its_last_token_where_the_trunk_trims() -> None:
    # Its logits are needed, so one token is always computed.
    assert resume_point([1, 2, 3, 9, 9], [1, 2, 3], rewindable=True, checkpoints=()) == 2


def test_a_recurrent_trunk_resumes_at_the_latest_checkpoint_before_the_divergence() -> None:
    cached = list(range(100))
    prompt = [*range(60), -1, -2]
    assert resume_point(cached, prompt, rewindable=False, checkpoints=[10, 40, 59, 70]) == 59
    assert resume_point(cached, prompt, rewindable=False, checkpoints=[70]) == 0
    # An attention-only trunk trims to one before the divergence (the head keeps one row more).
    assert resume_point(cached, prompt, rewindable=True, checkpoints=()) == 59


def test_nothing_shared_means_nothing_kept() -> None:
    assert resume_point([1, 2, 3], [7, 8], rewindable=True, checkpoints=[1, 2]) == 0
    assert resume_point([], [7, 8], rewindable=False, checkpoints=()) == 0


def test_checkpoints_every_interval_where_asked_and_before_the_last_token() -> None:
    assert checkpoint_marks(0, 2500, interval=1024) == [1024, 2048, 2499]
    assert checkpoint_marks(1500, 2100, interval=1024) == [2048]  # 2099 is too close
    assert checkpoint_marks(0, 2500, wanted=[300, 2600], interval=1024) == [300, 1024, 2048, 2499]
    assert checkpoint_marks(10, 11, interval=1024) == []


def test_checkpoints_too_close_to_the_last_one_are_skipped() -> None:
    # A turn that computes a short new message ends in one batch: its start is checkpoint
    # enough for an edit or Regenerate.
    assert checkpoint_marks(1730, 1757, wanted=[1733], interval=1024, min_gap=64) == []
    assert checkpoint_marks(0, 1000, wanted=[950], interval=1024, min_gap=64) == [950]
    assert checkpoint_marks(0, 1000, wanted=[990], interval=1024, min_gap=64) == [990]


def test_prefill_batches_end_at_every_mark_and_never_exceed_the_batch() -> None:
    assert chunk_ends(0, 1200, [1024, 1199], 512) == [512, 1024, 1199, 1200]
    assert chunk_ends(5, 12, [], 4) == [9, 12]
    assert chunk_ends(5, 12, [3, 12, 40], 100) == [12]


def test_kept_states_stay_within_the_budget_evicting_the_least_recently_used() -> None:
    kept = KeptStates(budget_bytes=100)
    kept.live_session("a").tokens.extend(range(10))
    kept.add_checkpoint("a", 3, KeptState(40, "three"))
    kept.add_checkpoint("a", 6, KeptState(40, "six"))
    kept.save_copy_of_live("a", KeptState(50, "whole"), extra=None)
    # 130 bytes asked for: the oldest (checkpoint 3) went; the copy shares checkpoint 6.
    assert kept.total_bytes == 90
    assert list(kept.live_session("a").checkpoints) == [6]
    assert [session.saved.payload for session in kept.saved_sessions("a")] == ["whole"]
    kept.touch(kept.live_session("a").checkpoints[6])
    kept.add_checkpoint("b", 2, KeptState(30, "other lane"))
    # The saved copy was least recently used now.
    assert kept.saved_sessions("a") == []
    assert kept.total_bytes == 70


def test_a_restored_session_becomes_live() -> None:
    kept = KeptStates(budget_bytes=1000)
    kept.live_session("a").tokens.extend([1, 2, 3])
    kept.save_copy_of_live("a", KeptState(10, "whole"), extra="hidden")
    kept.forget_live("a")
    [saved] = kept.saved_sessions("a")
    kept.restore(saved)
    assert kept.live_session("a").tokens == [1, 2, 3]
    assert kept.saved == [] and saved.saved is None


def _plan(
    prompt: list[int], sessions: list[Session], rows: dict[str, int], *, with_mtp: bool
) -> ResumePlan:
    def options(session: Session, shared: int) -> tuple[int, list[ResumeOption]]:
        point = resume_point(session.tokens, prompt, rewindable=True, checkpoints=(), common=shared)
        return rows[session.lane], [ResumeOption(point, point == len(session.tokens))]

    return plan_resume(prompt, sessions, options, with_mtp=with_mtp, recurrent=False)


def test_the_planner_takes_the_longest_resume_and_the_live_session_on_a_tie() -> None:
    live = Session("live", [1, 2, 3, 4])
    longer = Session("saved", [1, 2, 3, 4, 5, 6, 7])
    same = Session("same", [1, 2, 3, 4])
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    everything = {"live": 99, "saved": 99, "same": 99}
    plan = _plan(prompt, [live, longer], everything, with_mtp=True)
    assert (plan.session, plan.position, plan.source, plan.shared) == (longer, 7, "saved", 7)
    plan = _plan(prompt, [live, same], everything, with_mtp=True)
    assert (plan.session, plan.position, plan.source) == (live, 4, "live")
    plan = _plan([1, 2, 9, 9], [live], everything, with_mtp=False)
    assert (plan.position, plan.source) == (1, "trimmed")


def test_with_drafts_the_planner_keeps_only_what_the_drafter_covers() -> None:
    live = Session("live", [1, 2, 3, 4])
    saved = Session("saved", [1, 2, 3, 4, 5, 6, 7])
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    out_of_step = {"live": 99, "saved": -1}  # the saved session was kept without its drafter
    assert _plan(prompt, [live, saved], out_of_step, with_mtp=True).session is live
    assert _plan(prompt, [live, saved], out_of_step, with_mtp=False).session is saved
    nothing = _plan(prompt, [live], {"live": -1}, with_mtp=True)
    assert (nothing.position, nothing.source, nothing.option) == (0, "", None)
