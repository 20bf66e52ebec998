#!/usr/bin/python3
"""Reads an exported PEFT adapter folder and merged HF folder the way PEFT and transformers would,
in plain torch float64, and prints the logits of both forwards (tests/unit/peft-export.test.ts).

Usage: peft_check.py <dir> '{"tokens": [...], "N": n, "T": t}'
<dir> holds base-config.json, base-model.safetensors (the base model), merged-model.safetensors
(the merged export) and adapter-adapter_config.json, adapter-adapter_model.safetensors (the PEFT
folder). PEFT's semantics are re-implemented here (no peft package): the saved keys lose
PeftModel's 'base_model.model.' prefix to name the adapted module, scaling is lora_alpha / r
(lora_alpha / sqrt(r) with use_rslora), and each targeted Linear computes
base(x) + lora_B(lora_A(x)) * scaling (LoraLayer.update_layer, Linear.forward). The Llama forward
is tests/fixtures/make_fixtures.py's, itself independent of this project's TypeScript.
"""

import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import make_fixtures  # noqa: E402  (the fixtures' torch Llama)

PREFIX = "base_model.model."


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", (name, entry["dtype"])
        begin, end = entry["data_offsets"]
        data = bytearray(raw[8 + n + begin : 8 + n + end])
        out[name] = torch.frombuffer(data, dtype=torch.float32).reshape(entry["shape"]).double()
    return out


def main():
    folder, batch = sys.argv[1], json.loads(sys.argv[2])
    at = lambda name: os.path.join(folder, name)  # noqa: E731
    with open(at("base-config.json")) as f:
        cfg = json.load(f)
    with open(at("adapter-adapter_config.json")) as f:
        peft = json.load(f)
    assert peft["peft_type"] == "LORA" and peft["task_type"] == "CAUSAL_LM"
    assert peft["bias"] == "none" and not peft["fan_in_fan_out"] and not peft["use_dora"]
    r, alpha = peft["r"], peft["lora_alpha"]
    scaling = alpha / math.sqrt(r) if peft["use_rslora"] else alpha / r

    adapters = {}
    for key, value in read_safetensors(at("adapter-adapter_model.safetensors")).items():
        assert key.startswith(PREFIX), key
        name = key[len(PREFIX) :]
        module = name.rsplit(".lora_", 1)[0]
        # PEFT adapts a module when a target_modules entry is its name's last component(s).
        assert any(module == t or module.endswith("." + t) for t in peft["target_modules"]), key
        kind = name.rsplit(".", 2)[-2]
        assert value.shape == ((r, value.shape[1]) if kind == "lora_A" else (value.shape[0], r)), key
        adapters[name] = value
    targets = set(peft["target_modules"])
    for layer in range(cfg["num_hidden_layers"]):
        for t in targets:
            block = "self_attn" if t in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            assert f"model.layers.{layer}.{block}.{t}.lora_A.weight" in adapters, (layer, t)

    N, T = batch["N"], batch["T"]
    tokens = torch.tensor(batch["tokens"], dtype=torch.long).reshape(N, T)
    key_start = torch.zeros(N, dtype=torch.long)
    positions = torch.arange(T).repeat(N, 1)
    base = read_safetensors(at("base-model.safetensors"))
    merged = read_safetensors(at("merged-model.safetensors"))
    with torch.no_grad():
        peft_logits = make_fixtures.forward(
            cfg, base, tokens, key_start, positions, lora=(adapters, scaling)
        )
        merged_logits = make_fixtures.forward(cfg, merged, tokens, key_start, positions)
    json.dump(
        {"peft": peft_logits.flatten().tolist(), "merged": merged_logits.flatten().tolist()},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
