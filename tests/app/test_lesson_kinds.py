"""τ and speedup by kind of text in the lesson: the recording's kinds, the table and the sentence worded from them."""

from app import lesson


def test_the_recorded_sweep_sends_the_first_prompts_kinds_and_a_live_one_none(monkeypatch):
    sent = []
    monkeypatch.setattr(lesson, "run_on", lambda engine, fn, prompts, *args, **kwargs: sent.append((prompts, kwargs)))
    lesson.measure_temperatures(None)
    prompts, kwargs = sent[-1]
    assert len(prompts) == len(kwargs["kinds"]) == lesson.TEMPERATURE_PROMPTS
    assert kwargs["kinds"] == lesson.heldout_kinds()[:lesson.TEMPERATURE_PROMPTS]
    lesson.measure_temperatures_live(None)
    assert sent[-1][1]["kinds"] is None
