import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model
from vocadapt.components.metric_logging import InMemoryLogger
from vocadapt.components.training import LaptData, LaptHooks, LaptRuntime, LaptSettings, train_lapt

DATA = LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2})
EVAL = {"target": ITALIAN[:2], "source": ENGLISH[:2]}


def _settings(**kwargs):
    options = dict(max_steps=3, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1, seed=0)
    options.update(kwargs)
    return LaptSettings(**options)


def _lora_parameters(model, rank):
    return sum(rank * (m.in_features + m.out_features)
               for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "layers." in name)


def _expected(model, strategy, objective):
    """Trainable parameter counts per stage, computed from the untouched model's shapes."""
    V, H = model.config.vocab_size, model.config.hidden_size
    embeddings = V * H * (1 if model.config.tie_word_embeddings else 2)
    total = sum(p.numel() for p in model.parameters())
    layers = model.model.layers
    outer = sum(p.numel() for i in (0, 1, len(layers) - 2, len(layers) - 1) for p in layers[i].parameters())
    counts = {"full": {"full": total}, "lora": {"lora": _lora_parameters(model, 4) + embeddings},
              "two-stage": {"embeddings": embeddings, "full": total},
              "2x2-ls": {"2x2-ls": outer + embeddings}, "embeddings": {"embeddings": embeddings}}[strategy]
    return {kind: n + (V * H if objective == "mtp" else 0) for kind, n in counts.items()}


@pytest.mark.parametrize("objective", ["clm", "mtp"])
@pytest.mark.parametrize("strategy", ["full", "lora", "two-stage", "2x2-ls", "embeddings"])
def test_every_strategy_trains_what_it_says(tokenizer, strategy, objective):
    model = make_model(len(tokenizer), layers=6, tie=strategy != "lora")
    expected = _expected(model, strategy, objective)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = train_lapt(model, tokenizer, DATA, _settings(strategy=strategy, objective=objective, lora_rank=4),
                        hooks=LaptHooks(logger=InMemoryLogger()))
    assert result.trainable_parameters == expected
    assert type(result.model).__name__ == "LlamaForCausalLM"  # LoRA merged, MTP head dropped
    after = dict(result.model.named_parameters())
    changed = {name for name, p in after.items() if not torch.equal(p, before[name])}
    assert "model.embed_tokens.weight" in changed
    if strategy == "2x2-ls":
        assert not any(name.startswith(("model.layers.2.", "model.layers.3.")) for name in changed)
        assert any(name.startswith("model.layers.5.") for name in changed)
    if strategy == "embeddings":  # the body stays as it was
        assert changed <= {"model.embed_tokens.weight", "lm_head.weight"}
    if strategy == "lora":  # adapters fold into the linear weights; norms are not adapted
        assert not any("norm" in name for name in changed)
        assert "model.layers.0.self_attn.q_proj.weight" in changed


def test_loss_falls_and_metrics_are_honest(tokenizer):
    logger = InMemoryLogger()
    settings = _settings(max_steps=12, grad_accumulation_steps=2, eval_every=6, log_every=3)
    result = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings,
                        hooks=LaptHooks(logger=logger),
                        runtime=LaptRuntime(eval_documents=EVAL))
    losses = [loss for _, loss in logger.series("loss")]
    assert [step for step, _ in logger.series("loss")] == [3, 6, 9, 12]
    assert losses[-1] < losses[0] - 0.5
    assert [step for step, _ in logger.series("bits_per_byte_target")] == [6, 12]
    # real tokens: 2 sequences x 16 tokens x 2 micro-batches per step, no padding in packed batches
    assert result.tokens == 12 * 2 * 16 * 2 == logger.series("tokens")[-1][1]
    assert all(0.7 <= share <= 0.8 for _, share in logger.series("token_share_target"))
    lrs = [lr for _, lr in logger.series("learning_rate")]
    assert lrs[0] > lrs[-1] == pytest.approx(1e-3)  # cosine to min_lr_ratio x peak


def test_same_seed_same_losses_and_token_budget(tokenizer):
    runs = [train_lapt(make_model(len(tokenizer)), tokenizer, DATA, _settings(max_steps=None, max_tokens=100))
            for _ in range(2)]
    assert runs[0].steps == 4  # ceil(100 / (2 x 16)) steps
    assert runs[0].series("loss") == runs[1].series("loss")


@pytest.mark.parametrize("strategy", ["full", "two-stage"])
def test_resumed_run_matches_the_uninterrupted_one(tokenizer, tmp_path, strategy):
    settings = _settings(strategy=strategy, max_steps=6, checkpoint_every=3, stage_one_steps=3, warmup_steps=2)
    saved = {}

    def keep(step, write, metrics):
        write(tmp_path / f"step-{step}")
        saved[step] = tmp_path / f"step-{step}"

    straight = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings, hooks=LaptHooks(on_checkpoint=keep))
    resumed = train_lapt(make_model(len(tokenizer), seed=1), tokenizer, DATA, settings,
                         runtime=LaptRuntime(resume_state=saved[3]))
    assert [s for s, _ in resumed.history] == [1, 2, 3, 4, 5, 6]  # no step counted twice
    for (_, a), (_, b) in zip(straight.series("loss"), resumed.series("loss")):
        assert a == pytest.approx(b, abs=1e-5)
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.allclose(p, q, atol=1e-5), name


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r"strategy\n.*'full', 'lora', 'two-stage', '2x2-ls', 'embeddings', 'new-head' or 'new-rows'"):
        LaptSettings(strategy="everything")
    with pytest.raises(ValueError, match="needs a budget"):
        LaptSettings(max_steps=0, max_tokens=None)
    with pytest.raises(ValueError, match="only 2"):
        from vocadapt.components.training.strategies import set_trainable

        set_trainable(make_model(300, layers=2), "2x2-ls")


def test_unknown_settings_are_refused_with_the_nearest_name(tokenizer):
    """A field the loop does not read is an error, not a silent drop, whether the settings are built directly or
    handed to the loop as a mapping."""
    with pytest.raises(ValueError, match="lerning_rate: unknown field; did you mean learning_rate?"):
        LaptSettings(lerning_rate=1e-3)
    with pytest.raises(ValueError, match="objectve: unknown field; did you mean objective?"):
        train_lapt(make_model(len(tokenizer)), tokenizer, DATA, {"max_steps": 1, "objectve": "mtp"})


@pytest.mark.parametrize("tie", [True, False])
def test_flops_per_token_counts_matrix_products_once(tie):
    from vocadapt.components.training.throughput import detect_peak_flops, flops_per_token

    model = make_model(300, layers=2, tie=tie)
    V, H, L, T = 300, 32, 2, 64
    body = sum(p.numel() for name, p in model.named_parameters() if "embed_tokens" not in name and "lm_head" not in name)
    # the head is a matrix product (counted once even when tied); the input embedding is a lookup
    assert flops_per_token(model, T) == 6 * (body + V * H) + 12 * L * H * T
    if not torch.cuda.is_available():
        assert detect_peak_flops() is None  # no MFU on CPU rather than a made-up one


def test_compiled_decoder_layers_train_to_the_same_losses(tokenizer):
    """lapt.compile: every decoder layer goes through torch.compile (aot_eager here: the graph capture and
    autograd split of inductor without its CPU code generation, which would take minutes on 2 cores); the losses
    match eager training step for step."""
    eager = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, _settings(grad_accumulation_steps=2))
    model = make_model(len(tokenizer))
    compiled = train_lapt(model, tokenizer, DATA, _settings(grad_accumulation_steps=2, compile="aot_eager"))
    assert all(layer._compiled_call_impl is not None for layer in model.model.layers)
    assert [loss for _, loss in compiled.series("loss")] == pytest.approx(
        [loss for _, loss in eager.series("loss")], rel=1e-4)
    assert LaptSettings(compile=True).compile_backend == "inductor" and LaptSettings().compile_backend is None
    with pytest.raises(ValueError, match="compile"):
        LaptSettings(compile=3)


def test_training_forward_builds_no_kv_cache(tokenizer):
    """A KV cache in a training forward costs memory and, under torch.compile, made every decoder layer
    recompile (dynamo guards on the cache's per-layer state) until most layers fell back to eager."""
    model = make_model(len(tokenizer))
    seen = []
    model.register_forward_hook(lambda module, args, kwargs, out: seen.append(out.past_key_values), with_kwargs=True)
    train_lapt(model, tokenizer, DATA, _settings(max_steps=2))
    assert seen and all(cache is None for cache in seen)
