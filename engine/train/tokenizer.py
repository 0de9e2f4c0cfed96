"""Train the byte-level BPE tokenizer shared by every embedded model.

Byte-level means any string, emoji and control characters included, round-trips exactly. Two special
tokens are reserved up front: end-of-text (also used as padding) and the mask token that the block
drafters (DFlash, DSpark) feed in place of the tokens they are asked to predict.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from .corpus import corpus_files, read_text

EOS_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mask|>"
VOCAB_SIZE = 4096


def train_tokenizer(out_dir: Path, vocab_size: int = VOCAB_SIZE) -> Path:
    from transformers import PreTrainedTokenizerFast

    files = [f for f in corpus_files() if not f.heldout]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, MASK_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((read_text(f) for f in files), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        mask_token=MASK_TOKEN,
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 20,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    wrapped.save_pretrained(out_dir)
    return out_dir
