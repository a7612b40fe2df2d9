#include "export/decilm_remote_code.h"

namespace ac {

const std::string& decilm_configuration_py() {
  static const std::string text = R"PY("""DeciLM configuration (model_type "nemotron-nas", DeciLMForCausalLM), written by
`autocompress export` beside config.json so that transformers reads this folder:

    AutoConfig.from_pretrained(folder, trust_remote_code=True)

(config.json "auto_map": {"AutoConfig": "configuration_decilm.DeciLMConfig"}).

The fields are those of NVIDIA's Llama-3_1-Nemotron configuration_decilm.py: a Llama configuration
plus `block_configs`, one entry per layer (block_config.py AttentionConfig, FFNConfig):

    {"attention": {"no_op": bool, "replace_with_linear": bool, "n_heads_in_group": int | None},
     "ffn":       {"no_op": bool, "replace_with_linear": bool, "ffn_mult": float | None}}

A layer's KV heads are num_attention_heads // n_heads_in_group, its FFN width
find_multiple(int(2 * ffn_mult * hidden_size / 3), 256) (vLLM nemotron_nas.py
_ffn_mult_to_intermediate_size); a no_op part is removed. This file holds no model code: vLLM,
TensorRT-LLM and llama.cpp run DeciLM.
"""
from transformers import PretrainedConfig


def find_multiple(n, k):
    """The smallest multiple of k that is >= n."""
    return n if n % k == 0 else n + k - n % k


def ffn_mult_to_intermediate_size(ffn_mult, hidden_size):
    """A block's FFN width from its ffn_mult (vLLM nemotron_nas.py)."""
    return find_multiple(int(2 * ffn_mult * hidden_size / 3), 256)


class DeciLMConfig(PretrainedConfig):
    """A Llama configuration whose layers differ: block_configs gives each layer's attention
    (removed, or its KV-head group size) and FFN (removed, or its width multiplier)."""

    model_type = "nemotron-nas"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                 num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=None,
                 head_dim=None, hidden_act="silu", max_position_embeddings=2048,
                 initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, rope_theta=10000.0,
                 rope_scaling=None, attention_bias=False, attention_dropout=0.0, mlp_bias=False,
                 tie_word_embeddings=False, block_configs=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = (num_attention_heads if num_key_value_heads is None
                                    else num_key_value_heads)
        self.head_dim = hidden_size // num_attention_heads if head_dim is None else head_dim
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        if isinstance(getattr(type(self), "rope_scaling", None), property):
            # transformers 5: one rope_parameters object (rope_scaling is its deprecated alias)
            self.rope_parameters = dict(rope_scaling or {"rope_type": "default"},
                                        rope_theta=rope_theta)
        else:
            self.rope_scaling = rope_scaling
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.mlp_bias = mlp_bias
        if block_configs is None:
            block_configs = [{"attention": {"no_op": False, "replace_with_linear": False,
                                            "n_heads_in_group": num_attention_heads
                                            // self.num_key_value_heads},
                              "ffn": {"no_op": False, "replace_with_linear": False,
                                      "ffn_mult": 1.5 * intermediate_size / hidden_size}}
                             for _ in range(num_hidden_layers)]
        if len(block_configs) != num_hidden_layers:
            raise ValueError(f"DeciLMConfig: block_configs has {len(block_configs)} entries, "
                             f"expected num_hidden_layers {num_hidden_layers}")
        self.block_configs = [self._checked_block(i, b) for i, b in enumerate(block_configs)]
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)

    def _checked_block(self, i, block):
        """block_configs[i] as a plain dict, refused (ValueError naming the field) when vLLM's
        DeciLMDecoderLayer could not build it."""
        block = dict(block)
        attention, ffn = dict(block.get("attention", {})), dict(block.get("ffn", {}))
        for part, name in ((attention, "attention"), (ffn, "ffn")):
            part.setdefault("no_op", False)
            part.setdefault("replace_with_linear", False)
            if part["replace_with_linear"]:
                raise ValueError(f"DeciLMConfig: block_configs[{i}].{name}.replace_with_linear "
                                 "is true: this configuration describes no linear replacement")
        if not attention["no_op"]:
            group = attention.get("n_heads_in_group")
            if not isinstance(group, int) or group <= 0 or self.num_attention_heads % group:
                raise ValueError(f"DeciLMConfig: block_configs[{i}].attention.n_heads_in_group "
                                 f"{group!r} does not divide num_attention_heads "
                                 f"{self.num_attention_heads}")
        if not ffn["no_op"] and not isinstance(ffn.get("ffn_mult"), (int, float)):
            raise ValueError(f"DeciLMConfig: block_configs[{i}].ffn.ffn_mult "
                             f"{ffn.get('ffn_mult')!r}: expected a number (or no_op true)")
        block["attention"], block["ffn"] = attention, ffn
        return block

    def layer_num_key_value_heads(self, i):
        """KV heads of layer i (0 when its attention is removed)."""
        a = self.block_configs[i]["attention"]
        return 0 if a["no_op"] else self.num_attention_heads // a["n_heads_in_group"]

    def layer_intermediate_size(self, i):
        """FFN width of layer i (0 when its FFN is removed)."""
        f = self.block_configs[i]["ffn"]
        return 0 if f["no_op"] else ffn_mult_to_intermediate_size(f["ffn_mult"], self.hidden_size)
)PY";
  return text;
}

}  // namespace ac
