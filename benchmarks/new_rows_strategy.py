"""LAPT strategies side by side on the embedded default, bits per byte only: a small, cheap cousin of recovery.py.

SmolLM2-135M-Instruct expanded by the 5,000 most frequent new tokens of a 16K Italian byte-level BPE (trained on
5,000 lines, English protected as in recovery.py), new rows by FVT (no corpus pass, unlike recovery.py's Align);
each strategy trains a copy of that model on the same packed batches (75% Italian, 25% English, 4 x 128 tokens per
step) at one learning rate; every model is scored on held-out (validation split) and out-of-domain (Debian
fortunes) Italian and English, 6 documents each, cut to 600 characters. One JSON line per arm, on stdout and in
``<out>/results.jsonl``; it was written for ``lapt.strategy: new-rows`` (BENCHMARKS.md, "Only the new rows").

    python benchmarks/new_rows_strategy.py STEPS LEARNING_RATE OUT STRATEGY [STRATEGY ...]
    python benchmarks/new_rows_strategy.py 10 2e-3 /tmp/new-rows new-rows embeddings new-head
"""
import copy, json, os, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from vocadapt.components.initializers import configure_initializer
from vocadapt.components.metrics.bits_per_byte import bits_per_byte
from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings
from vocadapt.components.tokenizers.expand import expand_with_top_k
from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer
from vocadapt.components.training import LaptData, LaptSettings, train_lapt
from vocadapt.components.training.data import read_documents
from vocadapt.platform.assets.embedded import load_assets
from vocadapt.platform.assets.out_of_domain import out_of_domain_documents

STEPS, LR, LINES, DOCS, CHARS = int(sys.argv[1]), float(sys.argv[2]), 5000, 6, 600
out = Path(sys.argv[3]); out.mkdir(parents=True, exist_ok=True)
started = time.perf_counter()
def log(**row):
    row["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(row), flush=True)
    with open(out / "results.jsonl", "a") as f: f.write(json.dumps(row) + "\n")
torch.manual_seed(0)
assets = load_assets(languages=("it",))
src_tok = AutoTokenizer.from_pretrained(assets.model_dir)
source = AutoModelForCausalLM.from_pretrained(assets.model_dir, dtype=torch.float32)
it_train, en_train = read_documents(assets.corpus("it", "train")), read_documents(assets.corpus("en", "train"))
trained = train_tokenizer([assets.corpus("it", "train")],
                          TokenizerTrainingSpec("bytelevel-bpe", 16384, max_lines=LINES, seed=0, like=src_tok),
                          out / "tok", show_progress=False, overwrite=True)
lexicon = assets.lexicon("en")
change = expand_with_top_k(src_tok, trained, it_train[:LINES], 5000, protect=en_train[:LINES],
                           protect_words=lexicon.read_text(encoding="utf-8").split() if lexicon else None)
expanded = adapt_embeddings(copy.deepcopy(source), Initialisation(configure_initializer("fvt"), seed=0),
                            source_tokenizer=src_tok, target_tokenizer=change.tokenizer,
                            layout=RowLayout("expand", target_to_source=change.target_to_source,
                                             new_target_ids=change.new_token_ids))
sets = {"held_out_it": read_documents(assets.corpus("it", "validation"))[:DOCS],
        "held_out_en": read_documents(assets.corpus("en", "validation"))[:DOCS],
        "ood_it": out_of_domain_documents("it", limit=DOCS), "ood_en": out_of_domain_documents("en", limit=DOCS)}
sets = {k: [d[:CHARS] for d in v] for k, v in sets.items()}
log(stage="setup", new_tokens=len(change.new_token_ids))
def bpb(model, tok):
    return {k: round(bits_per_byte(model, tok, v, max_length=128, batch_size=8), 4) for k, v in sets.items()}
log(arm="source", **bpb(source, src_tok))
log(arm="expand+fvt step 0", **bpb(expanded, change.tokenizer))
data = LaptData({"target": it_train[:2000], "source": en_train[:2000]})
for strategy in sys.argv[4:]:
    t = time.perf_counter()
    settings = LaptSettings(max_steps=STEPS, batch_size=4, sequence_length=128, learning_rate=LR, warmup_steps=1,
                            strategy=strategy, seed=0, mixing={"target": 0.75, "source": 0.25}, head_fit_passes=12)
    result = train_lapt(copy.deepcopy(expanded), change.tokenizer, data, settings)
    train_s = time.perf_counter() - t
    log(arm=strategy, steps=STEPS, tokens=result.tokens, train_s=round(train_s, 1),
        trainable=result.trainable_parameters, **bpb(result.model, change.tokenizer))
    del result
