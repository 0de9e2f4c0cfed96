"""The loop's bookkeeping: cache rollback, seeded reproducibility, the trace, text, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
from collections import Counter

import pytest
import torch

from engine.target import Target
from engine.drafters.small_lm import SmallLMDrafter
from engine.models import crop_cache, forward_logits, load_causal_lm, new_cache, pick_device
from engine.timing import SpanClock
from engine.contract.types import MAX_DRAFTS, EngineError, GenerationConfig

from conftest import tiny_qwen3

PROMPT = "def parse(self, text):\n"


# --- cache rollback -------------------------------------------------------------------------------------

def test_crop_then_extend_matches_a_fresh_forward(random_engine):
    model = random_engine.target
    ids = torch.randint(2, 4000, (1, 30), generator=torch.Generator().manual_seed(0))
    cache = new_cache(model)
    forward_logits(model, ids[:, :20], cache)
    forward_logits(model, torch.randint(2, 4000, (1, 6)), cache)  # a rejected block
    crop_cache(cache, 20)
    assert cache.get_seq_length() == 20
    extended = forward_logits(model, ids[:, 20:], cache)[0]
    fresh = forward_logits(model, ids, new_cache(model))[0, 20:]
    assert torch.allclose(extended, fresh, atol=1e-4)


@pytest.mark.parametrize("method", ["eagle3", "dflash"])
def test_target_cache_holds_all_committed_tokens_but_the_newest(random_engine, monkeypatch, method):
    """Spy on every target forward: the cache must hold exactly the committed length minus one."""
    seen = []
    real_prefill, real_verify = Target.prefill, Target.verify

    def prefill(self, ids):
        if self.fused is random_engine.fused_target:  # the target's, not a small-LM drafter's own
            seen.append((self.length, ids.shape[1]))
        return real_prefill(self, ids)

    def verify(self, ids, parents=None):
        if self.fused is random_engine.fused_target:
            seen.append((self.length, ids.shape[1]))
        return real_verify(self, ids, parents)

    monkeypatch.setattr(Target, "prefill", prefill)
    monkeypatch.setattr(Target, "verify", verify)
    result = random_engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=40, drafts_per_step=5))
    assert seen[0] == (0, len(result.prompt_ids))  # the prefill
    committed = len(result.prompt_ids) + len(result.prefill.committed)
    for (cache_len, fed), step in zip(seen[1:], result.steps):
        assert cache_len == committed - 1
        assert fed == 1 + step.num_verified
        committed += len(step.committed)
    assert len(seen) == 1 + len(result.steps)


def test_ar_drafter_rollback_drafts_like_a_fresh_drafter(random_engine):
    """After a rejection the drafter's cache is cut back; its next draft equals a new drafter's."""
    model = random_engine.drafter_models["eagle3"]
    clock = SpanClock(torch.device("cpu"))
    prompt = torch.tensor([random_engine.encode_prompt(PROMPT)])
    drafter = SmallLMDrafter(model)
    drafter.start(prompt, None, clock)
    committed = torch.cat([prompt, torch.tensor([[5]])], dim=1)  # the prefill's token
    n = committed.shape[1]
    block = drafter.propose(committed, 6, 0.0, torch.Generator(), clock)
    assert drafter.length == n + 5  # the last draft is sampled, never fed
    committed = torch.cat([committed, block.ids[:2].view(1, -1), torch.tensor([[7]])], dim=1)  # 2 accepted + bonus
    drafter.accept(n + 2, None)
    assert drafter.length == n + 2
    again = drafter.propose(committed, 4, 0.0, torch.Generator(), clock)
    fresh = SmallLMDrafter(model)
    fresh.start(committed[:, :-1], None, clock)
    assert torch.equal(again.ids, fresh.propose(committed, 4, 0.0, torch.Generator(), clock).ids)


# --- reproducibility --------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["rejection", "match"])
@pytest.mark.parametrize("method", ["baseline", "eagle3", "dflash"])
def test_same_seed_same_output_at_temperature(random_engine, method, rule):
    config = GenerationConfig(method=method, max_new_tokens=30, temperature=0.8, seed=11, verify_rule=rule)
    first, second = random_engine.generate(PROMPT, config), random_engine.generate(PROMPT, config)
    assert first.output_ids == second.output_ids
    assert [s.drafted_ids for s in first.steps] == [s.drafted_ids for s in second.steps]
    other = random_engine.generate(PROMPT, dataclasses.replace(config, seed=12))
    assert other.output_ids != first.output_ids


# --- the trace ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overlap", [False, True])
def test_trace_is_consistent(random_engine, overlap):
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=40, drafts_per_step=4,
                                                             overlap=overlap))
    out = [t.id for t in result.prefill.committed]
    for step in result.steps:
        a = step.num_accepted
        assert step.num_verified == len(step.drafted) <= 4
        assert [t.verdict for t in step.drafted] == ["accepted"] * a + (
            ["rejected"] + ["unverified"] * (len(step.drafted) - a - 1) if a < len(step.drafted) else [])
        assert [t.id for t in step.committed] == step.drafted_ids[:a] + [step.bonus_id]
        assert [t.source for t in step.committed] == ["accepted"] * a + ["bonus"]
        for token in step.drafted:
            assert 0.0 < token.draft_prob <= 1.0
            assert len(token.draft_top) == 5 and token.draft_top[0].prob >= token.draft_prob - 1e-6
            if token.verdict != "unverified":
                assert token.accept_prob == (1.0 if token.verdict == "accepted" else 0.0)
                assert len(token.target_top) == 5
        draft_spans = [s for s in step.spans if s.work == "draft"]
        assert len(draft_spans) == step.num_verified  # K serial draft forwards
        assert all(s.work in ("draft", "verify", "host") and s.end_s >= s.start_s for s in step.spans)
        out += [t.id for t in step.committed]
    assert tuple(out) == result.output_ids
    spans = [s for step in (result.prefill, *result.steps) for s in step.spans]
    # The device work is one serial chain on one clock; the host work of a step comes after that step's
    # device work (and, with overlap, runs while the next step's device work does).
    device = [s for s in spans if s.label != "trace and text"]
    assert all(b.start_s >= a.end_s for a, b in zip(device, device[1:]))
    for step in (result.prefill, *result.steps):
        host = [sp for sp in step.spans if sp.label == "trace and text"]
        assert len(host) == 1 and host[0].start_s >= max(sp.end_s for sp in step.spans if sp is not host[0])
    if not overlap:
        assert all(b.start_s >= a.end_s for a, b in zip(spans, spans[1:]))  # everything in turn
    s = result.summary
    assert s.num_new_tokens == len(result.output_ids) == 1 + sum(len(st.committed) for st in result.steps)
    assert s.alpha == pytest.approx(sum(st.num_accepted for st in result.steps) / s.num_steps)
    assert s.tau == pytest.approx(s.alpha + 1)
    assert s.wall_s == pytest.approx(max(sp.end_s for sp in spans))
    assert 0.0 <= s.bubble_s < s.wall_s
    assert len(result.per_position_acceptance) == 4


def test_rejection_trace_has_ratio_and_draw(random_engine):
    config = GenerationConfig(method="eagle3", max_new_tokens=30, temperature=1.0, seed=3)
    result = random_engine.generate(PROMPT, config)
    judged = [t for step in result.steps for t in step.drafted if t.verdict != "unverified"]
    assert judged
    for token in judged:
        assert token.accept_prob == pytest.approx(min(1.0, token.target_prob / token.draft_prob), rel=1e-4)
        assert (token.draw < token.accept_prob) == (token.verdict == "accepted")


def test_result_json_has_the_contract_fields(random_engine):
    result = random_engine.generate(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=12))
    d = json.loads(json.dumps(result.to_dict()))
    assert {"method", "preset", "device", "output_ids", "text", "steps", "summary"} <= d.keys()
    assert {"drafted_ids", "num_verified", "num_accepted", "bonus_id", "spans"} <= d["steps"][0].keys()
    assert {"lane", "start_s", "end_s"} <= d["steps"][0]["spans"][0].keys()
    assert {"num_new_tokens", "num_steps", "alpha", "tau", "wall_s", "tokens_per_s"} <= d["summary"].keys()


# --- text ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt", ["x = '🚀🚀 日本語'\n", "a\x00b\x07c\x1b[31m\t", "caf\u00e9 \udce9", "\u00e9" * 30])
def test_text_pieces_join_to_the_decoded_output(random_engine, tokenizer, prompt):
    for temperature in (0.0, 1.5):
        result = random_engine.generate(prompt, GenerationConfig(method="eagle3", max_new_tokens=40,
                                                                 temperature=temperature, seed=2))
        pieces = "".join(t.text for step in (result.prefill, *result.steps) for t in step.committed)
        assert pieces == result.text == tokenizer.decode(list(result.output_ids), skip_special_tokens=True)


def test_prompt_with_invalid_utf8_bytes_is_repaired(random_engine, tokenizer):
    """A prompt cut mid-character arrives (from argv) with a lone surrogate; it reads as U+FFFD."""
    ids = random_engine.encode_prompt("caf" + b"\xc3".decode("utf-8", "surrogateescape"))
    assert tokenizer.decode(ids) == "caf\ufffd"
    assert tokenizer.decode(random_engine.encode_prompt("x\ud800y")) == "x\ufffdy"  # any other lone surrogate, as the app repairs it


# --- bad input -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    dict(method="nope"), dict(scheduler="sometimes"), dict(confidence_threshold=1.5), dict(max_new_tokens=0), dict(max_new_tokens=10**6),
    dict(drafts_per_step=0), dict(drafts_per_step=99), dict(temperature=-0.1), dict(temperature=math.nan),
    dict(temperature=math.inf), dict(verify_rule="maybe"), dict(seed=-1),
])
def test_bad_config_is_one_clear_error(random_engine, bad):
    with pytest.raises(EngineError) as info:
        random_engine.generate(PROMPT, GenerationConfig(**bad))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("prompt", ["", "   \n", "x " * 200, "x" * 100_001])
def test_bad_prompt_is_one_clear_error(random_engine, prompt):
    with pytest.raises(EngineError, match="prompt"):
        next(random_engine.stream(prompt, GenerationConfig()))


# --- checked requests -----------------------------------------------------------------------------------

def test_a_request_is_checked_once_and_says_what_will_run(random_engine, monkeypatch):
    """Engine.requests validates each config and encodes the prompt once for all of them, and cuts a block
    drafter's drafts per step to its trained block; running a request checks nothing again."""
    counts, validate, encode = Counter(), GenerationConfig.validate, random_engine.encode_prompt
    monkeypatch.setattr(GenerationConfig, "validate", lambda config: (counts.update(["validate"]), validate(config)))
    monkeypatch.setattr(random_engine, "encode_prompt", lambda prompt: (counts.update(["encode"]), encode(prompt))[1])
    block = random_engine.max_drafts("dflash")
    asked = min(block + 3, MAX_DRAFTS)
    assert asked > block
    configs = [GenerationConfig(method=m, max_new_tokens=32, drafts_per_step=asked)
               for m in ("baseline", "eagle3", "dflash")]
    requests = random_engine.requests(PROMPT, configs)
    assert counts == {"validate": 3, "encode": 1}
    assert [r.drafts_per_step for r in requests] == [None, asked, block]  # the serial drafter drafts any K
    assert requests[0].prompt_ids == tuple(encode(PROMPT)) and len({id(r.prompt_ids) for r in requests}) == 1
    result = random_engine.generate(requests[2])
    steps = list(random_engine.stream(requests[1]))
    assert counts == {"validate": 3, "encode": 1}
    assert result.config == requests[2].config and result.config.drafts_per_step == block
    assert max(len(s.drafted) for s in steps) == asked
    assert pickle.loads(pickle.dumps(requests[2])) == requests[2]  # it travels to an engine in another process
    with pytest.raises(TypeError):
        random_engine.generate(requests[0], configs[0])


# --- loading ------------------------------------------------------------------------------------------

def test_loads_a_checkpoint_folder_in_hub_format(tmp_path):
    model = tiny_qwen3(300, seed=4)
    model.save_pretrained(tmp_path / "ckpt")
    loaded = load_causal_lm(str(tmp_path / "ckpt"), torch.device("cpu"))
    ids = torch.tensor([[1, 2, 3]])
    assert loaded.dtype == torch.float32
    assert torch.allclose(loaded(ids).logits, model(ids).logits, atol=1e-5)


def test_missing_model_is_one_clear_error(tmp_path):
    with pytest.raises(EngineError, match="cannot load model"):
        load_causal_lm(str(tmp_path / "nothing-here"), torch.device("cpu"))


def test_device_auto_is_cpu_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert pick_device("auto").type == "cpu"
    with pytest.raises(EngineError):
        pick_device("cuda")


def test_cpu_threads_follow_the_request_then_the_preset():
    from engine.models import describe_device, set_cpu_threads

    before = torch.get_num_threads()
    cpu = torch.device("cpu")
    try:
        set_cpu_threads(cpu, 2)
        assert torch.get_num_threads() == 2 and describe_device(cpu) == "cpu (2 threads)"
        set_cpu_threads(cpu, None)  # None leaves the setting alone
        assert torch.get_num_threads() == 2
        set_cpu_threads(cpu, 1)
        assert torch.get_num_threads() == 1 and describe_device(cpu) == "cpu (1 thread)"
        for bad in (0, -1, 1.5, True):
            with pytest.raises(EngineError, match="threads"):
                set_cpu_threads(cpu, bad)
    finally:
        torch.set_num_threads(before)


# --- overlap ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["baseline", "eagle3", "dflash", "dspark"])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_overlap_changes_timing_only(random_engine, method, temperature):
    """The same run with and without overlap: same tokens, same drafts and verdicts, same text."""
    runs = [random_engine.generate(PROMPT, GenerationConfig(method=method, max_new_tokens=30, temperature=temperature,
                                                            seed=4, overlap=overlap)) for overlap in (False, True)]
    plain, overlapped = runs
    assert plain.output_ids == overlapped.output_ids and plain.text == overlapped.text
    strip = lambda r: [(s.drafted, s.num_verified, s.num_accepted, s.committed) for s in r.steps]  # noqa: E731
    assert strip(plain) == strip(overlapped)


def test_stopping_a_stream_early_ends_the_device_thread(random_engine):
    import threading
    import time

    stream = random_engine.stream(PROMPT, GenerationConfig(method="eagle3", max_new_tokens=200, overlap=True))
    first_two = [next(stream), next(stream)]
    stream.close()
    assert [s.index for s in first_two] == [0, 1]
    deadline = time.monotonic() + 5
    while any(t.name == "speclab-device-loop" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "speclab-device-loop" for t in threading.enumerate())


def test_ids_past_the_tokenizer_vocabulary_write_nothing_and_show_their_id(random_engine):
    """Real models pad their vocabulary past the tokenizer's (Qwen3: 151936 rows, 151669 tokens); a draft
    or a top token there must not break the trace or the text."""
    from engine.text import TokenTexts

    texts = TokenTexts(random_engine.tokenizer)
    past = len(random_engine.tokenizer) + 5
    assert texts.token_text(past) == f"[id {past}]"
    decoder = texts.decoder()
    assert decoder.push(past) == "" and decoder.push(random_engine.tokenizer.encode("x")[0]) == "x"


@pytest.mark.parametrize("method", ["baseline", "dspark"])
def test_the_last_step_says_why_a_run_ended(random_engine, monkeypatch, method):
    """eos, length or stopped: the trace alone tells, so a summary needs no eos_id or max_new_tokens."""
    from engine.contract.summary import summarize

    steps = list(random_engine.stream(PROMPT, GenerationConfig(method=method, max_new_tokens=12)))
    assert [s.finish_reason for s in steps[:-1]] == [None] * (len(steps) - 1)
    assert steps[-1].finish_reason == summarize(steps).finish_reason == "length"
    assert summarize(steps[:2]).finish_reason == "stopped"  # a trace cut short: the run was stopped
    written = [t.id for s in steps for t in s.committed]
    monkeypatch.setattr(random_engine, "eos_id", written[5])  # the sixth token ends the text now
    ended = list(random_engine.stream(PROMPT, GenerationConfig(method=method, max_new_tokens=12)))
    assert summarize(ended).finish_reason == "eos" and [t.id for s in ended for t in s.committed][-1] == written[5]


def test_the_embedded_models_run_in_float32_on_cuda_and_the_large_presets_in_bfloat16():
    """What Engine.load asks for on a GPU, read without one: the embedded models keep the CPU's float32 (a
    near-tie rounded one way by a one-token step and the other by a verify would turn a run away from the
    baseline), the Qwen3-4B presets halve their memory in bfloat16; the CPU is float32 whatever the preset."""
    from engine.contract.presets import PRESETS
    from engine.models import default_dtype

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert default_dtype(cuda, PRESETS["tiny"].cuda_dtype) == torch.float32
    assert {default_dtype(cuda, PRESETS[name].cuda_dtype) for name in ("qwen3-4b", "qwen3-4b-zlab")} == {torch.bfloat16}
    assert {default_dtype(cpu, preset.cuda_dtype) for preset in PRESETS.values()} == {torch.float32}
