"""Tiny transformers checkpoints built offline for the torch tests (no downloads): a byte-level BPE
tokenizer trained on a given corpus, and a 2-layer, hidden-32 Llama with random weights."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bpe_tokenizer(transformers: Any, corpus: Iterable[str], vocab_size: int) -> Any:
    """A ``PreTrainedTokenizerFast`` trained on ``corpus``; ``<|im_end|>`` ends, ``<|endoftext|>`` pads."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus, trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )


def tiny_llama(transformers: Any, tokenizer: Any, max_positions: int) -> Any:
    """A random-weight ``LlamaForCausalLM`` over ``tokenizer``'s vocabulary (seed torch first)."""
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
    )
    return transformers.LlamaForCausalLM(config)
