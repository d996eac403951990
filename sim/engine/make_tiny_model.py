"""Make the sim's tiny model: a 2-layer Llama with random weights and a word-level tokenizer.

Sim only. The real vLLM engine in the sim serves it in place of MiniMax M3 (which needs
two GB10s): it loads, shards across TP ranks, and answers with words drawn from its
vocabulary. Deterministic (fixed seed), made at image build time, no hub access.

    python3 make_tiny_model.py OUTDIR
"""
import json
import pathlib
import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

# Markers the recipe's minimax_m3 reasoning and tool parsers look up in the vocabulary.
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>",
           "<mm:think>", "</mm:think>", "<minimax:tool_call>", "</minimax:tool_call>"]
WORDS = ("the a an and or of to in on at for with from by is are was were be been it this that these "
         "spark node head worker cluster tensor parallel ray engine cache kernel triton clock power "
         "model token tokens decode prefill vision image text red blue square circle report sales "
         "quarterly finance title value q1 q2 q3 prepared dept yes no ok hello world answer question "
         "one two three four five six seven eight nine ten zero number numbers what which who why how "
         "fast slow warm cold wedged healthy serving memory gpu cpu network fabric link up down "
         "weather city temperature call function tool result json name arguments").split()
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|' + m['role'] + '|> ' }}"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %}"
    "{{ ' ' }}{% endfor %}"
    "{% if tools %}<|tool|> {% for t in tools %}{{ t['function']['name'] if t['function'] is defined else t['name'] }} {% endfor %}{% endif %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    punct = list(".,:;!?$()'\"-/") + [str(d) for d in range(10)]
    vocab = {tok: i for i, tok in enumerate(SPECIAL + WORDS + punct)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", additional_special_tokens=SPECIAL[4:])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
                         bos_token_id=1, eos_token_id=2, pad_token_id=3, tie_word_embeddings=False,
                         torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2,
                                                            "do_sample": False}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
