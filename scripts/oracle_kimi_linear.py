#!/usr/bin/env python3
"""External oracle for the CPU reference: a tiny random Kimi Linear model built with the
`transformers` implementation (model_type kimi_linear), saved in the published checkpoint layout,
plus its logits for a fixed prompt (prefill) and for greedy decode steps with a cache.

Run on an H200 machine (it has PyTorch and transformers); everything runs on the CPU in fp32:

    python3 scripts/oracle_kimi_linear.py --config scenarios/models/kimi-linear-twin.json \
        --out tests/data/kimi_linear_oracle

Writes <out>/config.json (the published Kimi Linear form, as read by k3perf), <out>/model.safetensors
(tensor names as in the published checkpoint) and <out>/expected_logits.json. k3perf's test
`OracleKimiLinear` loads these and compares its logits (relative error <= 1e-4).
"""
import argparse
import json
import math
import os

import torch


def transformers_config(cfg):
    """KimiLinearConfig arguments from a published-form config.json."""
    from transformers import KimiLinearConfig

    lin = cfg["linear_attn_config"]
    n = cfg["num_hidden_layers"]
    full = set(lin["full_attn_layers"])  # 1-based
    vocab = cfg["vocab_size"]
    return KimiLinearConfig(
        vocab_size=vocab,
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        moe_intermediate_size=cfg["moe_intermediate_size"],
        num_hidden_layers=n,
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"],
        kv_lora_rank=cfg["kv_lora_rank"],
        q_lora_rank=cfg.get("q_lora_rank"),
        qk_rope_head_dim=cfg["qk_rope_head_dim"],
        qk_nope_head_dim=cfg["qk_nope_head_dim"],
        v_head_dim=cfg["v_head_dim"],
        num_local_experts=cfg["num_experts"],
        num_experts_per_tok=cfg["num_experts_per_token"],
        n_shared_experts=cfg["num_shared_experts"],
        routed_scaling_factor=cfg["routed_scaling_factor"],
        norm_topk_prob=cfg.get("moe_renormalize", True),
        linear_head_dim=lin["head_dim"],
        linear_num_heads=lin["num_heads"],
        linear_conv_kernel_dim=lin["short_conv_kernel_size"],
        layer_types=["full_attention" if i + 1 in full else "linear_attention" for i in range(n)],
        mlp_layer_types=["dense" if i < cfg["first_k_dense_replace"] else "sparse" for i in range(n)],
        rms_norm_eps=cfg["rms_norm_eps"],
        hidden_act=cfg["hidden_act"],
        pad_token_id=min(cfg.get("pad_token_id", 0), vocab - 1),
        bos_token_id=min(cfg.get("bos_token_id", 1), vocab - 1),
        eos_token_id=min(cfg.get("eos_token_id", 2), vocab - 1),
        tie_word_embeddings=False,
    )


def randomize(model, seed):
    """Weights large enough that every layer changes the logits, small enough to stay finite."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.empty(p.shape).uniform_(1.0, 16.0, generator=g)))
            elif name.endswith("dt_bias"):
                p.copy_(torch.empty(p.shape).uniform_(-1.0, 1.0, generator=g))
            elif "norm" in name and p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() >= 2:
                fan_in = p.shape[-1] if p.dim() == 2 else p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=g))


def published_names(state, first_dense):
    """transformers writes the dense MLP of layers < first_k_dense_replace under block_sparse_moe;
    the published checkpoint names it mlp.*."""
    out = {}
    for k, v in state.items():
        parts = k.split(".")
        if len(parts) > 4 and parts[1] == "layers" and parts[3] == "block_sparse_moe" and int(parts[2]) < first_dense \
                and parts[4] in ("gate_proj", "up_proj", "down_proj"):
            k = ".".join(parts[:3] + ["mlp"] + parts[4:])
        out[k] = v.contiguous()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="published-form Kimi Linear config.json (e.g. the twin)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--prompt-tokens", type=int, default=40)
    ap.add_argument("--decode-steps", type=int, default=4)
    args = ap.parse_args()

    import transformers
    from safetensors.torch import load_file, save_file
    from transformers import KimiLinearForCausalLM

    torch.manual_seed(args.seed)
    with open(args.config) as f:
        cfg = json.load(f)
    model = KimiLinearForCausalLM(transformers_config(cfg)).float().eval()
    randomize(model, args.seed)

    g = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(3, cfg["vocab_size"], (1, args.prompt_tokens), generator=g)
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        prefill = out.logits[0].double()
        cache = out.past_key_values
        steps, tokens = [], []
        token = int(prefill[-1].argmax())
        for _ in range(args.decode_steps):
            tokens.append(token)
            step = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            logits = step.logits[0, -1].double()
            steps.append(logits.tolist())
            token = int(logits.argmax())
        # The same prompt without a cache, chunked form only (a second path through transformers).
        nocache = model(input_ids=prompt, use_cache=False).logits[0].double()

    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join(args.out, "hf")
    model.save_pretrained(tmp)
    state = load_file(os.path.join(tmp, "model.safetensors"))
    save_file(published_names(state, cfg["first_k_dense_replace"]), os.path.join(args.out, "model.safetensors"),
              metadata={"format": "pt"})
    for name in os.listdir(tmp):
        os.remove(os.path.join(tmp, name))
    os.rmdir(tmp)
    published = dict(cfg)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        published[key] = min(cfg.get(key, 0), cfg["vocab_size"] - 1)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(published, f, indent=2)
        f.write("\n")
    expected = {
        "generator": "scripts/oracle_kimi_linear.py",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": args.seed,
        "prompt": prompt[0].tolist(),
        "prefill_logits": prefill.tolist(),
        "prefill_logits_without_cache": nocache.tolist(),
        "decode_tokens": tokens,
        "decode_logits": steps,
    }
    with open(os.path.join(args.out, "expected_logits.json"), "w") as f:
        json.dump(expected, f)
    diff = (prefill - nocache).abs().max().item()
    print(f"wrote {args.out}: prompt {args.prompt_tokens} tokens, {args.decode_steps} decode steps; "
          f"cache vs no-cache prefill max |diff| {diff:.3g}; transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
