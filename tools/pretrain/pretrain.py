#!/usr/bin/python3
"""Pretrains the bundled tiny reasoner (public/models/tiny-reasoner) on the synthetic corpus.

Pipeline (seeded end to end; run from the repository root):
  npx vite build --mode cli
  node dist-cli/make-corpus.js --out tools/pretrain/data          # traces + tokenizer (TypeScript)
  /usr/bin/python3 tools/pretrain/pretrain.py                    # this script, CPU, one thread

The model is a Llama-family decoder written in plain torch with the semantics of
tests/fixtures/make_fixtures.py (RMSNorm, HF rotate_half rotary embeddings, causal attention,
SwiGLU MLP, tied embeddings) and Hugging Face parameter names, so model.safetensors loads in the
app (src/io/hf-folder.ts), in src/ref/llama.ts and in transformers' LlamaForCausalLM unchanged.
Training is next-token cross-entropy on completion tokens only (the prompt is given).

After training the script measures the base model the way the GRPO demo samples it: temperature 1.0,
no top-k / top-p, at most MAX_NEW_TOKENS new tokens, on the held-out Countdown prompts of eval.jsonl
(problems the corpus never contains, see src/tasks/traces.ts isHeldOut). Answers are checked with a
Python port of src/tasks/verify.ts (Countdown) and reflection with the markers of
src/rewards/reflection.ts; every sample is written to tools/pretrain/eval_samples.jsonl, which
tests/unit/tiny-reasoner.test.ts re-scores with the TypeScript code. The model card (README.md)
is written from the measured numbers.

Run with Debian's interpreter, which has python3-torch:  /usr/bin/python3 tools/pretrain/pretrain.py
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import struct
import sys
import time
from fractions import Fraction

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 80,
    "intermediate_size": 224,
    "num_hidden_layers": 4,
    "num_attention_heads": 5,
    "num_key_value_heads": 5,
    "head_dim": 16,
    "vocab_size": None,  # from the tokenizer
    "max_position_embeddings": 128,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "mlp_bias": False,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "torch_dtype": "float32",
}

TRAIN = {
    "seed": 1234,
    "steps": 12000,
    "batch_size": 64,
    "lr": 3e-3,
    "min_lr_ratio": 0.1,
    "warmup_steps": 200,
    "weight_decay": 0.01,
    "betas": (0.9, 0.98),
    "grad_clip": 1.0,
}

DEFAULT_NAME = "tiny-reasoner"  # the shipped reasoner; --name tiny-student for the smaller student
TEMPERATURE = 1.0
MAX_NEW_TOKENS = 64  # replaced by the corpus's maxCompletionTokens (the demo's completion limit)
EVAL_SEED = 4321

# ---------------------------------------------------------------------------------------------
# Model


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Linear(torch.nn.Module):
    """y = x·Wᵀ with W (out, in) as Hugging Face stores it, computed as a 1×1 convolution: Debian's
    torch links the reference BLAS, whose matmul is ~10× slower here than oneDNN's convolution."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_out, n_in))

    def forward(self, x):
        return linear(x, self.weight)


def linear(x, weight):
    shape = x.shape
    y = F.conv2d(x.reshape(-1, shape[-1], 1, 1), weight[:, :, None, None])
    return y.reshape(*shape[:-1], weight.shape[0])


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, H, D = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
        Hkv = cfg["num_key_value_heads"]
        self.H, self.Hkv, self.D = H, Hkv, D
        self.q_proj = Linear(C, H * D)
        self.k_proj = Linear(C, Hkv * D)
        self.v_proj = Linear(C, Hkv * D)
        self.o_proj = Linear(H * D, C)

    def forward(self, x, cos, sin, allowed, cache=None):
        """x (N, T, C); cos/sin (N, T, D); allowed (N, 1, T, S) over the S = past + T keys."""
        N, T, _ = x.shape
        q = self.q_proj(x).view(N, T, self.H, self.D).transpose(1, 2)  # (N, H, T, D)
        k = self.k_proj(x).view(N, T, self.Hkv, self.D).transpose(1, 2)  # (N, Hkv, T, D)
        v = self.v_proj(x).view(N, T, self.Hkv, self.D).transpose(1, 2)
        c, s = cos[:, None], sin[:, None]
        q = q * c + rotate_half(q) * s
        k = k * c + rotate_half(k) * s
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        rep = self.H // self.Hkv
        if rep > 1:  # HF repeat_kv: query head h reads kv head h // rep
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)  # (N, H, T, S)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # (N, H, T, D)
        return self.o_proj(out.transpose(1, 2).reshape(N, T, self.H * self.D))


class MLP(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, I = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = Linear(C, I)
        self.up_proj = Linear(C, I)
        self.down_proj = Linear(I, C)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, allowed, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, allowed, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = torch.nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class TinyLlama(torch.nn.Module):
    """state_dict() keys are the Hugging Face names (model.embed_tokens.weight, …); the LM head is
    the tied embedding, so there is no lm_head.weight."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        D = cfg["head_dim"]
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        std = cfg["initializer_range"]
        for name, p in self.named_parameters():
            if not name.endswith("norm.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=std)

    def rope(self, positions):
        freqs = positions.to(torch.float32)[..., None] * self.inv_freq  # (N, T, D/2)
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, tokens, positions, allowed, caches=None):
        """tokens, positions (N, T); allowed (N, 1, T, S). Returns logits (N, T, V)."""
        cos, sin = self.rope(positions)
        x = self.model.embed_tokens(tokens)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, allowed, None if caches is None else caches[i])
        return linear(self.model.norm(x), self.model.embed_tokens.weight)


def causal_mask(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]


# ---------------------------------------------------------------------------------------------
# Data


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def batches(examples, batch_size, rng):
    """Endless length-bucketed batches: shuffle, sort runs of 32 batches by length, shuffle batches."""
    order = list(range(len(examples)))
    while True:
        rng.shuffle(order)
        chunk = batch_size * 32
        out = []
        for start in range(0, len(order) - batch_size + 1, chunk):
            run = sorted(order[start : start + chunk], key=lambda i: examples[i][2])
            out.extend(run[j : j + batch_size] for j in range(0, len(run) - batch_size + 1, batch_size))
        rng.shuffle(out)
        for b in out:
            yield b


def collate(examples, idx, pad_id):
    """Right-padded (B, T) tokens and targets; targets are -100 except on completion tokens."""
    T = max(examples[i][2] for i in idx)
    tokens = torch.full((len(idx), T), pad_id, dtype=torch.long)
    targets = torch.full((len(idx), T), -100, dtype=torch.long)
    for r, i in enumerate(idx):
        prompt, completion, n = examples[i]
        seq = prompt + completion
        tokens[r, :n] = torch.tensor(seq)
        # Position t predicts token t + 1: the completion tokens are targets of the columns before them.
        targets[r, len(prompt) - 1 : n - 1] = torch.tensor(completion)
    return tokens, targets


# ---------------------------------------------------------------------------------------------
# Sampling with a KV cache (left-padded prompts, positions t - keyStart, as src/model/sampler.ts)


@torch.no_grad()
def sample(model, prompts, eos_id, pad_id, max_new, temperature, generator, greedy=False):
    N = len(prompts)
    P = max(len(p) for p in prompts)
    tokens = torch.full((N, P), pad_id, dtype=torch.long)
    key_start = torch.zeros(N, dtype=torch.long)
    for n, p in enumerate(prompts):
        key_start[n] = P - len(p)
        tokens[n, P - len(p) :] = torch.tensor(p)
    cols = torch.arange(P)
    positions = (cols[None, :] - key_start[:, None]).clamp(min=0)
    valid_key = cols[None, :] >= key_start[:, None]  # (N, S)
    # Pad queries attend to themselves only (their outputs reach no valid query).
    allowed = causal_mask(P) & (valid_key[:, None, None, :] | torch.eye(P, dtype=torch.bool)[None, None])
    caches = [dict() for _ in model.model.layers]
    logits = model(tokens, positions, allowed, caches)[:, -1]
    out = [[] for _ in range(N)]
    done = torch.zeros(N, dtype=torch.bool)
    for step in range(max_new):
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]
        for n in range(N):
            if not done[n]:
                out[n].append(int(nxt[n]))
        done |= nxt == eos_id
        if bool(done.all()):
            break
        col = P + step
        valid_key = torch.cat([valid_key, torch.ones(N, 1, dtype=torch.bool)], dim=1)
        pos = (col - key_start).clamp(min=0)[:, None]
        logits = model(nxt[:, None], pos, valid_key[:, None, None, :], caches)[:, -1]
    return out


# ---------------------------------------------------------------------------------------------
# Scoring: ports of src/rewards/rewards.ts (format, answer), src/tasks/verify.ts (Countdown) and
# src/rewards/reflection.ts (markers). tests/unit/tiny-reasoner.test.ts checks they agree.

WS = "[ \\t\\n\\v\\f\\r]"
NO_TAG = "(?:(?!</?think>|</?answer>)[\\s\\S])*"
FORMAT_RE = re.compile(f"^{WS}*<think>({NO_TAG})</think>{WS}*<answer>({NO_TAG})</answer>{WS}*$")
ANSWER_RE = re.compile(r"<answer>([\s\S]*?)</answer>")
DEFAULT_MARKERS = ["wait", "recheck", "rethink", "try again", "re-evaluate", "check again", "re-examine"]
COUNTDOWN_MARKERS = ["doesn't work", "does not work", "let me try", "another combination"]


def marker_regex(markers):
    def source(m):
        words = m.strip().split()
        return "[ \\t\\n\\v\\f\\r]+".join(re.escape(w).replace("\\'", "'").replace("'", "['\u2019]") for w in words)

    alts = "|".join(source(m) for m in sorted(set(markers), key=len, reverse=True))
    return re.compile(f"(?<![A-Za-z0-9_])(?:{alts})(?![A-Za-z0-9_])", re.IGNORECASE)


REFLECTION_RE = marker_regex(DEFAULT_MARKERS + COUNTDOWN_MARKERS)


def think_text(completion):
    open_ = completion.find("<think>")
    if open_ >= 0:
        start = open_ + len("<think>")
        close = completion.find("</think>", start)
        return completion[start : close if close >= 0 else None]
    close = completion.find("</think>")
    if close >= 0:
        return completion[:close]
    answer = completion.find("<answer>")
    return completion[:answer] if answer >= 0 else completion


def verify_countdown(text, nums, target):
    """TinyZero rules as src/tasks/verify.ts: exact rationals, each number once, + - * / ( )."""
    text = text.strip(" \t\n\v\f\r")
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in " \t\n\v\f\r":
            i += 1
        elif ch.isdigit() and ch in "0123456789":
            j = i
            while j < len(text) and text[j] in "0123456789":
                j += 1
            lit = text[i:j]
            if len(lit) > 100 or (len(lit) > 1 and lit[0] == "0" and re.search("[1-9]", lit)):
                return False
            tokens.append(("num", int(lit)))
            i = j
        elif ch in "+-*/()":
            if ch in "*/" and i + 1 < len(text) and text[i + 1] == ch:
                return False
            tokens.append(("op", ch))
            i += 1
        else:
            return False
    if not tokens:
        return False
    pos = 0
    literals = []
    div_zero = [False]

    def peek():
        return tokens[pos][1] if pos < len(tokens) and tokens[pos][0] == "op" else None

    def expr(depth):
        nonlocal pos
        left = term(depth)
        while peek() in ("+", "-"):
            op = peek()
            pos += 1
            right = term(depth)
            left = left + right if op == "+" else left - right
        return left

    def term(depth):
        nonlocal pos
        left = unary(depth)
        while peek() in ("*", "/"):
            op = peek()
            pos += 1
            right = unary(depth)
            if op == "*":
                left = left * right
            elif right == 0:
                div_zero[0] = True
                left = Fraction(0)
            else:
                left = left / right
        return left

    def unary(depth):
        nonlocal pos
        neg = False
        while peek() in ("+", "-"):
            neg = neg != (peek() == "-")
            pos += 1
        v = primary(depth)
        return -v if neg else v

    def primary(depth):
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("syntax")
        kind, val = tokens[pos]
        if kind == "num":
            pos += 1
            literals.append(val)
            return Fraction(val)
        if val != "(" or depth + 1 > 64:
            raise ValueError("syntax")
        pos += 1
        inner = expr(depth + 1)
        if pos >= len(tokens) or tokens[pos] != ("op", ")"):
            raise ValueError("syntax")
        pos += 1
        return inner

    try:
        value = expr(0)
        if pos != len(tokens):
            return False
    except ValueError:
        return False
    if sorted(literals) != sorted(nums) or div_zero[0]:
        return False
    return value.denominator == 1 and value.numerator == target


def score(completion, nums, target):
    answers = ANSWER_RE.findall(completion)
    answer = answers[-1] if answers else None
    return {
        "format": FORMAT_RE.match(completion) is not None,
        "correct": answer is not None and verify_countdown(answer, nums, target),
        "reflects": REFLECTION_RE.search(think_text(completion)) is not None,
    }


def summarize(rows):
    def acc(xs):
        return sum(r["correct"] for r in xs) / len(xs) if xs else float("nan")

    def mean_len(xs):
        return sum(r["tokens"] for r in xs) / len(xs) if xs else float("nan")

    refl = [r for r in rows if r["reflects"]]
    plain = [r for r in rows if not r["reflects"]]
    return {
        "completions": len(rows),
        "accuracy": acc(rows),
        "format_rate": sum(r["format"] for r in rows) / len(rows),
        "reflection_rate": len(refl) / len(rows),
        "truncated_rate": sum(not r["finished"] for r in rows) / len(rows),
        "reflecting": {"count": len(refl), "accuracy": acc(refl), "mean_length": mean_len(refl)},
        "not_reflecting": {"count": len(plain), "accuracy": acc(plain), "mean_length": mean_len(plain)},
        "mean_length": mean_len(rows),
    }


def evaluate(model, evals, id_to_token, eos_id, pad_id, samples_per_prompt, greedy=False):
    model.eval()
    gen = torch.Generator().manual_seed(EVAL_SEED)
    rows = []
    for k in range(samples_per_prompt):
        for start in range(0, len(evals), 128):
            chunk = evals[start : start + 128]
            outs = sample(model, [e["prompt"] for e in chunk], eos_id, pad_id, MAX_NEW_TOKENS,
                          TEMPERATURE, gen, greedy)
            for e, ids in zip(chunk, outs):
                finished = bool(ids) and ids[-1] == eos_id
                text = "".join(id_to_token[i] for i in (ids[:-1] if finished else ids))
                row = {"id": e["id"], "mode": "greedy" if greedy else "sampled", "sample": k, "nums": e["nums"], "target": e["target"],
                       "completion": text, "tokens": len(ids), "finished": finished}
                row.update(score(text, e["nums"], e["target"]))
                rows.append(row)
    model.train()
    return rows


# ---------------------------------------------------------------------------------------------
# Output


def write_safetensors(path, tensors):
    """F32 safetensors (header JSON, 8-byte aligned, then raw little-endian data), HF names."""
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def pct(x):
    return "–" if x != x else f"{100 * x:.1f}%"  # NaN: no completions to measure


def try_diagnostics(samples_path):
    """Where the sampled Countdown tries go wrong, from the scored samples. A think text is split
    into tries at ". wait "; each try has two written steps "p o1 q = r, s o2 t = u".
    Forward guesses (sloppy style, "a op b = x, x op c = v") are checked for true arithmetic, for
    using the prompt's numbers, and for aiming (whether some operation on x and c reaches the target,
    and whether the try took it). Backward tries (careful style, "backward: T inv c = y, a op b = z")
    are checked the same way: true arithmetic, the
    prompt's numbers, and aiming (whether some operation on a and b gives y, and whether the try
    took it). `backward_share` is the share of completions whose first try is backward."""
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: a / b if b else None}
    step = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+), (\d+) ([-+*/]) (\d+) = (\d+)$")
    fwd = {"tries": 0, "arithmetic": 0, "numbers": 0, "reachable": 0, "aimed": 0}
    bwd = {"tries": 0, "arithmetic": 0, "numbers": 0, "reachable": 0, "aimed": 0}
    completions = backward_first = 0
    for row in read_jsonl(samples_path):
        think = re.search(r"<think>(.*)</think>", row["completion"]) if row["mode"] == "sampled" else None
        if row["mode"] == "sampled":
            completions += 1
        search = think.group(1).split(". check again ")[0] if think else ""
        opened_backward = search.startswith("backward: ")
        search = search[len("backward: "):] if opened_backward else search
        for k, text in enumerate(search.split(". wait ") if search else []):
            mt = step.match(text)
            if not mt:
                continue
            p, o1, q, r, s_, o2, t, u = mt.groups()
            p, q, r, s_, t, u = map(int, (p, q, r, s_, t, u))
            nums, target = row["nums"], row["target"]
            arith = ops[o1](p, q) == r and ops[o2](s_, t) == u
            backward = opened_backward
            if backward:
                d = bwd
                rest = list(nums)
                if q in rest:  # c must be a given number, the first step the other two
                    rest.remove(q)
                    d["numbers"] += sorted([s_, t]) == sorted(rest)
                if any(ops[o](l, m) == r for o in ops for l, m in ((s_, t), (t, s_))):
                    d["reachable"] += 1
                    d["aimed"] += u == r
                backward_first += k == 0
            else:
                d = fwd
                c = t if s_ == r else s_
                d["numbers"] += sorted([p, q, c]) == sorted(nums) and r in (s_, t)
                if any(ops[o](l, m) == target for o in ops for l, m in ((r, c), (c, r))):
                    d["reachable"] += 1
                    d["aimed"] += u == target
            d["tries"] += 1
            d["arithmetic"] += arith
    nan = float("nan")

    def rates(d):
        n = d["tries"]
        return {"tries": n, "arithmetic": d["arithmetic"] / n if n else nan,
                "numbers": d["numbers"] / n if n else nan,
                "reachable": d["reachable"] / n if n else nan,
                "aimed": d["aimed"] / d["reachable"] if d["reachable"] else nan}

    return {"forward": rates(fwd), "backward": rates(bwd),
            "backward_share": backward_first / completions if completions else nan}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--out", default=os.path.join(ROOT, "public", "models", "tiny-reasoner"))
    ap.add_argument("--steps", type=int, default=TRAIN["steps"])
    ap.add_argument("--eval-samples", type=int, default=1, help="samples per held-out prompt")
    ap.add_argument("--samples-out", default=os.path.join(HERE, "eval_samples.jsonl"))
    ap.add_argument("--run-out", default=os.path.join(HERE, "run.json"),
                    help="where the run's settings, loss log and measured rates go")
    ap.add_argument("--hidden-size", type=int, default=CONFIG["hidden_size"])
    ap.add_argument("--intermediate-size", type=int, default=CONFIG["intermediate_size"])
    ap.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    ap.add_argument("--heads", type=int, default=CONFIG["num_attention_heads"],
                    help="attention heads (and key/value heads); head_dim = hidden size / heads")
    ap.add_argument("--lr", type=float, default=TRAIN["lr"])
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads: results are reproducible for a given count, not across counts")
    ap.add_argument("--name", default=DEFAULT_NAME,
                    help="the model's name, for its card (tiny-student: the smaller second bundled model)")
    ap.add_argument("--card-only", action="store_true",
                    help="rewrite the model card from run.json and config.json, without training")
    args = ap.parse_args()
    if args.card_only:
        with open(args.run_out) as f:
            run = json.load(f)
        with open(os.path.join(args.out, "config.json")) as f:
            cfg = json.load(f)
        write_card(args.out, cfg, run, args.samples_out, args.name, command_line(args, cfg, run))
        return

    # One thread by default: other work shares the cores, and the thread count fixes the reduction order.
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(TRAIN["seed"])
    rng = random.Random(TRAIN["seed"])
    t0 = time.time()

    tok_json = json.load(open(os.path.join(args.data, "tokenizer.json")))
    vocab = tok_json["model"]["vocab"]
    id_to_token = {i: t for t, i in vocab.items()}
    specials = {t["content"] for t in tok_json["added_tokens"] if t["special"]}
    for i, t in list(id_to_token.items()):
        if t in specials:
            id_to_token[i] = ""  # decode as the app does with skipSpecialTokens
    eos_id, pad_id = vocab["</s>"], vocab["<pad>"]
    if args.hidden_size % args.heads != 0:
        raise SystemExit(f"--hidden-size {args.hidden_size} is not a multiple of --heads {args.heads}")
    cfg = dict(CONFIG, vocab_size=len(vocab), hidden_size=args.hidden_size,
               intermediate_size=args.intermediate_size, num_hidden_layers=args.layers,
               num_attention_heads=args.heads, num_key_value_heads=args.heads,
               head_dim=args.hidden_size // args.heads)
    corpus_stats = json.load(open(os.path.join(args.data, "stats.json")))
    global MAX_NEW_TOKENS
    MAX_NEW_TOKENS = corpus_stats["mix"].get("maxCompletionTokens", MAX_NEW_TOKENS)

    train = read_jsonl(os.path.join(args.data, "train.jsonl"))
    examples = [(r["prompt"], r["completion"], len(r["prompt"]) + len(r["completion"])) for r in train]
    assert max(e[2] for e in examples) <= cfg["max_position_embeddings"]
    evals = read_jsonl(os.path.join(args.data, "eval.jsonl"))
    print(f"{len(examples)} traces, {len(evals)} held-out prompts, vocab {cfg['vocab_size']}", file=sys.stderr)

    model = TinyLlama(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": TRAIN["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=TRAIN["betas"],
    )
    steps = args.steps

    def lr_at(step):
        if step < TRAIN["warmup_steps"]:
            return args.lr * (step + 1) / TRAIN["warmup_steps"]
        progress = (step - TRAIN["warmup_steps"]) / max(1, steps - TRAIN["warmup_steps"])
        floor = TRAIN["min_lr_ratio"]
        return args.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))

    log = []
    it = batches(examples, TRAIN["batch_size"], rng)
    running, tokens_seen = 0.0, 0
    for step in range(steps):
        idx = next(it)
        tokens, targets = collate(examples, idx, pad_id)
        T = tokens.shape[1]
        positions = torch.arange(T)[None, :].expand(tokens.shape[0], T)
        logits = model(tokens, positions, causal_mask(T))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), TRAIN["grad_clip"])
        opt.step()
        running += loss.item()
        tokens_seen += int((targets != -100).sum())
        if (step + 1) % 250 == 0:
            log.append({"step": step + 1, "loss": running / 250, "seconds": round(time.time() - t0, 1)})
            print(f"step {step + 1}/{steps} loss {running / 250:.4f} ({time.time() - t0:.0f} s)", file=sys.stderr)
            running = 0.0
    train_seconds = time.time() - t0

    rows = evaluate(model, evals, id_to_token, eos_id, pad_id, args.eval_samples)
    metrics = summarize(rows)
    greedy_rows = evaluate(model, evals, id_to_token, eos_id, pad_id, 1, greedy=True)
    greedy = summarize(greedy_rows)
    total_seconds = time.time() - t0
    print(json.dumps({"sampled": metrics, "greedy": greedy}, indent=1), file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), model.state_dict())
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    gen_cfg = {
        "bos_token_id": cfg["bos_token_id"],
        "eos_token_id": cfg["eos_token_id"],
        "pad_token_id": cfg["pad_token_id"],
        "do_sample": True,
        "temperature": TEMPERATURE,
        "top_k": 0,
        "top_p": 1.0,
        "max_new_tokens": MAX_NEW_TOKENS,
    }
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(gen_cfg, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.data, name), os.path.join(args.out, name))
    with open(args.samples_out, "w") as f:
        for r in rows + greedy_rows:
            f.write(json.dumps(r) + "\n")
    run = {
        "torch_version": torch.__version__,
        "parameters": n_params,
        "train": dict(TRAIN, steps=steps, lr=args.lr, threads=args.threads),
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(total_seconds, 1),
        "completion_tokens_seen": tokens_seen,
        "loss_log": log,
        "eval": {"temperature": TEMPERATURE, "max_new_tokens": MAX_NEW_TOKENS, "seed": EVAL_SEED,
                 "prompts": len(evals), "sampled": metrics, "greedy": greedy},
        "corpus": corpus_stats,
    }
    with open(args.run_out, "w") as f:
        json.dump(run, f, indent=1)
        f.write("\n")
    write_card(args.out, cfg, run, args.samples_out, args.name, command_line(args, cfg, run))
    print(f"done in {total_seconds:.0f} s", file=sys.stderr)


def repo_path(path):
    """A path as the card quotes it: relative to the repository, or absolute outside it."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return os.path.abspath(path) if rel.startswith("..") else rel


def command_line(args, cfg, run):
    """The pretrain.py command that makes this model: the flags whose values differ from the
    defaults (the shipped model's command is the bare one), the size from its config and steps and
    learning rate from its run (so --card-only writes the command of the run it reads). Paths are
    relative to the repository."""
    defaults = {"--data": os.path.join(HERE, "data"), "--out": os.path.join(ROOT, "public", "models", DEFAULT_NAME),
                "--samples-out": os.path.join(HERE, "eval_samples.jsonl"), "--run-out": os.path.join(HERE, "run.json")}
    given = {"--data": args.data, "--out": args.out, "--samples-out": args.samples_out, "--run-out": args.run_out}
    parts = ["/usr/bin/python3 tools/pretrain/pretrain.py"]
    if args.name != DEFAULT_NAME:
        parts.append(f"--name {args.name}")
    for flag, key in (("--hidden-size", "hidden_size"), ("--intermediate-size", "intermediate_size"),
                      ("--layers", "num_hidden_layers"), ("--heads", "num_attention_heads")):
        if cfg[key] != CONFIG[key]:
            parts.append(f"{flag} {cfg[key]}")
    if run["train"]["steps"] != TRAIN["steps"]:
        parts.append(f"--steps {run['train']['steps']}")
    if run["train"]["lr"] != TRAIN["lr"]:
        parts.append(f"--lr {run['train']['lr']:g}")
    for flag, path in given.items():
        if os.path.abspath(path) != os.path.abspath(defaults[flag]):
            parts.append(f"{flag} {repo_path(path)}")
    return " ".join(parts)


def intro(name, run):
    """The card's opening paragraph: the shipped reasoner's, or the student's with its size against
    the reasoner's (tools/pretrain/run.json)."""
    if name == DEFAULT_NAME:
        return (f"The bundled default model of GRPO Playground: a {run['parameters']:,}-parameter Llama-family decoder\n"
                "pretrained on synthetic Countdown search traces.")
    teacher = None
    teacher_run = os.path.join(HERE, "run.json")
    if os.path.exists(teacher_run):
        with open(teacher_run) as f:
            teacher = json.load(f)["parameters"]
    size = (f" ({run['parameters'] / teacher:.0%} of the tiny reasoner's {teacher:,})" if teacher else "")
    return (f"The second bundled model of GRPO Playground, the **student**: a {run['parameters']:,}-parameter\n"
            f"Llama-family decoder{size}, pretrained like the tiny reasoner\n"
            "(public/models/tiny-reasoner) on the same synthetic Countdown search traces, with the same tokenizer\n"
            "and script, so that the reasoner can be distilled into it and the R1 paper's distillation\n"
            "findings measured in miniature.")


def write_card(out, cfg, run, samples_path, name=None, command=None):
    name = name or DEFAULT_NAME
    command = command or "/usr/bin/python3 tools/pretrain/pretrain.py"
    samples_rel = repo_path(samples_path)
    m, g, c = run["eval"]["sampled"], run["eval"]["greedy"], run["corpus"]
    d = try_diagnostics(samples_path)
    mix = c["mix"]
    cd = c["countdown"]
    styles = c["styles"]
    size_kb = os.path.getsize(os.path.join(out, "model.safetensors")) / 1024
    ra, na = m["reflecting"]["accuracy"], m["not_reflecting"]["accuracy"]
    better = ra == ra and na == na and ra > na  # NaN-safe
    verdict = ("it does: reflecting samples are right more often" if better
               else "for this model it does NOT yet: reflecting samples are not right more often")

    def yes(ok):
        return "yes" if ok else "**no**"

    direction = mix.get("carefulDirection", "forward")
    if direction == "backward":
        careful_what = ('opens with "backward:", undoes a last step ("36 - 6 = 30": x + 6 = 36 needs '
                        'x = 30), computes a first step on the other two numbers and compares; on a '
                        f'mismatch ". wait" and another last step, up to {mix["maxTries"]}'
                        + ('; after a hit ". check again" and the answer computed forward'
                           if mix.get("verifyHit") else ''))
        careful_how = (f"A sloppy guess's first step is a uniform pick among two-step equations with non-negative integer "
                       f"intermediates; its second step aims at the target (takes the operation that reaches it, if one "
                       f"does) with probability aimRate = {mix.get('aimRate', 0)}, else is uniform too. A careful try "
                       f"undoes a uniformly picked last step (one not tried yet, whose needed value a first step can "
                       f"reach at all) and takes the first-step operation that gives the needed value when one does "
                       f"(probability {mix.get('carefulAimRate', 1)}): a single-digit fact, not a two-digit search. "
                       f"The model chooses its way of working at the first token of its think text (\"backward\" or "
                       f"a number), and every careful trace reflects: \"wait\" after a miss, \"check again\" after a "
                       f"hit.")
        careful_example = ("<think>backward: 36 - 4 = 32, 6 * 5 = 30. wait 36 - 6 = 30, 6 * 5 = 30. "
                           "check again 30 + 6 = 36</think><answer>(6 * 5) + 6</answer>")
    else:
        careful_what = ('compares each result with the target; on a mismatch ". wait" and another '
                        f'candidate, up to {mix["maxTries"]}')
        careful_how = (f"A candidate's first step is a uniform pick among two-step equations with non-negative integer "
                       f"intermediates; its second step aims at the target (takes the operation that reaches it, if one "
                       f"does) with probability aimRate = {mix.get('aimRate', 0)} in sloppy traces and "
                       f"{mix.get('carefulAimRate', mix.get('aimRate', 0))} in careful ones, else is uniform too.")
        careful_example = ("<think>7 * 6 = 42, 42 + 1 = 43. wait 7 + 6 = 13, 13 * 1 = 13</think>"
                           "<answer>(7 + 6) * 1</answer>")
    whole = mix.get("wholeNumbersUpTo", 0)
    numbers_how = (f"every whole number 0..{whole} as one token (larger numbers fall apart into digits)"
                   if whole else "digits (a number is one token per digit)")
    fw, bw = d["forward"], d["backward"]
    diagnosis = (
        f"Where its tries go wrong (sampled, {samples_rel}). Forward guesses "
        f"({fw['tries']} tries \"a op b = x, x op c = v\"): both steps' arithmetic true in {pct(fw['arithmetic'])}, "
        f"the prompt's numbers used in {pct(fw['numbers'])}; the first step leaves the target one operation "
        f"away in {pct(fw['reachable'])}, and then the second step takes that operation in {pct(fw['aimed'])} "
        f"(aiming a forward guess is a lookup over x, the last number and the target, which this size of "
        f"model does not learn well).")
    if bw["tries"]:
        diagnosis += (
            f" Backward tries ({bw['tries']} tries \"T inv c = y, a op b = z\", in "
            f"{pct(d['backward_share'])} of completions from the first try): arithmetic true in "
            f"{pct(bw['arithmetic'])}, the prompt's numbers used in {pct(bw['numbers'])}; some operation on the "
            f"other two numbers gives y in {pct(bw['reachable'])}, and the try takes it in {pct(bw['aimed'])} "
            f"of those.")

    text = f"""# {name}

{intro(name, run)} It is built so that GRPO with rule rewards (format +
accuracy) can select one behaviour, **careful work**: it sometimes works backward from the target,
checks each step against what it needs and, on a mismatch, says "wait" and tries another step. In
the pretraining corpus the careful traces are right far more often; whether that holds for this
model's own samples is measured below ({verdict}). Everything here is produced by committed, seeded code (numbers below were measured
by `tools/pretrain/pretrain.py` and written into this card by it).

## Intended use

GRPO demos on CPU-emulated WebGPU: Countdown with **3 numbers in 1..10 and targets 1..100**
(`{{"numbers": 3, "maxNumber": 10}}`), R1-Zero prompt template, temperature 1.0, completions of at
most {run['eval']['max_new_tokens']} tokens. Prompts are {c['maxPromptTokens']} tokens at most. It knows nothing
else: other tasks or wordings tokenize into `<unk>` and give nonsense.

Evaluate on held-out problems: `isHeldOut(problem)` in `src/tasks/traces.ts` (FNV-1a hash of the
sorted numbers and the target, bucket < 100 of 1000, about 10% of problems) is never in the corpus.

## Model

| | |
|---|---|
| architecture | LlamaForCausalLM: RMSNorm, rotary (rotate_half, θ = {cfg['rope_theta']:g}), SwiGLU, tied embeddings |
| size | C = {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers, {cfg['num_attention_heads']} heads × {cfg['head_dim']}, I = {cfg['intermediate_size']}, V = {cfg['vocab_size']}: **{run['parameters']:,} parameters** |
| files | model.safetensors (F32, Hugging Face names, {size_kb:.0f} KiB), config.json, generation_config.json, tokenizer.json, tokenizer_config.json |
| context | {cfg['max_position_embeddings']} positions |

Tokenizer (tokenizer.json, Hugging Face format, loads in transformers.js): {cfg['vocab_size']} tokens. Specials
`<pad>` (0), `<s>` (1, BOS, added to every prompt), `</s>` (2, EOS), `<unk>` (3); the tags
`<think>` `</think>` `<answer>` `</answer>`; each fixed span of the R1-Zero template and of the
Countdown / arithmetic questions as one token (the template's text is unchanged, only cut into a few
pieces);
{numbers_how};
operators and the words of the traces ("wait", "backward", "check again"), each with and without
one leading space. Decoding is concatenation, so text round-trips exactly.

## Data

`node dist-cli/make-corpus.js --out tools/pretrain/data` (src/tasks/traces.ts, seed {c['seed']}):
{c['count']:,} traces, problems from the project's own generators (src/tasks/countdown.ts,
src/tasks/arithmetic.ts), every answer judged by their verifiers.

| style | share | what it does | accuracy | reflects | mean tokens |
|---|---|---|---|---|---|
| sloppy Countdown | {pct(styles['sloppy']['traces'] / c['count'])} | computes one candidate step by step and answers it | {pct(styles['sloppy']['accuracy'])} | 0% | {styles['sloppy']['meanCompletionTokens']:.1f} |
| careful Countdown | {pct(styles['careful']['traces'] / c['count'])} | {careful_what} | {pct(styles['careful']['accuracy'])} | {pct(styles['careful']['reflectionRate'])} | {styles['careful']['meanCompletionTokens']:.1f} |
| arithmetic drill | {pct(styles['drill']['traces'] / c['count'])} | `a op b = c` for 1-digit + - * and 2-digit + - | 100% | 0% | {styles['drill']['meanCompletionTokens']:.1f} |

{careful_how} No trace "knows" the answer; a careful trace starts no try that would take it past
{mix.get('maxCompletionTokens', 'the')} completion tokens (the demo's limit). Countdown traces overall: accuracy
{pct(cd['accuracy'])}, reflection {pct(cd['reflectionRate'])}; accuracy when reflecting
{pct(cd['accuracyReflecting'])} vs {pct(cd['accuracyNotReflecting'])} (mix: checkRate {mix['checkRate']},
arithmeticShare {mix['arithmeticShare']}, maxTries {mix['maxTries']}, careful direction {direction}).

Example (careful): `{careful_example}`

## Training

`{command}` (python3-torch {run['torch_version']}, CPU, 1 thread,
deterministic): AdamW (lr {run['train']['lr']}, betas {tuple(run['train']['betas'])}, weight decay
{run['train']['weight_decay']}, warmup {run['train']['warmup_steps']}, cosine to
{run['train']['min_lr_ratio']}×), batch {run['train']['batch_size']}, {run['train']['steps']} steps,
gradient clip {run['train']['grad_clip']}, cross-entropy on completion tokens only
({run['completion_tokens_seen']:,} completion tokens seen). Final training loss
{run['loss_log'][-1]['loss']:.3f}. Runtime: {run['train_seconds'] / 60:.1f} min training,
{run['total_seconds'] / 60:.1f} min including evaluation, on this project's 2-core machine.

## Base rates (held-out)

{run['eval']['prompts']} held-out Countdown prompts (distinct problems, none in the corpus), sampled
the way the GRPO demo samples: temperature {TEMPERATURE}, no top-k / top-p, at most {run['eval']['max_new_tokens']}
new tokens, seed {run['eval']['seed']}. Reflection = a docs/grpo.md §7 marker (or a Countdown marker) in
the think text. Samples: {samples_rel}.

| metric | sampled (T = 1) | greedy |
|---|---|---|
| accuracy | **{pct(m['accuracy'])}** | {pct(g['accuracy'])} |
| format | {pct(m['format_rate'])} | {pct(g['format_rate'])} |
| reflection rate | **{pct(m['reflection_rate'])}** | {pct(g['reflection_rate'])} |
| accuracy when reflecting | **{pct(m['reflecting']['accuracy'])}** ({m['reflecting']['count']} completions) | {pct(g['reflecting']['accuracy'])} ({g['reflecting']['count']}) |
| accuracy when not reflecting | **{pct(m['not_reflecting']['accuracy'])}** ({m['not_reflecting']['count']}) | {pct(g['not_reflecting']['accuracy'])} ({g['not_reflecting']['count']}) |
| mean length (tokens) | {m['mean_length']:.1f} (reflecting {m['reflecting']['mean_length']:.1f}, not {m['not_reflecting']['mean_length']:.1f}) | {g['mean_length']:.1f} |
| truncated at {run['eval']['max_new_tokens']} tokens | {pct(m['truncated_rate'])} | {pct(g['truncated_rate'])} |

## Against the base-model targets

| target | measured (sampled) | met |
|---|---|---|
| writes the format reliably | {pct(m['format_rate'])} | {yes(m['format_rate'] >= 0.9)} |
| right about 10–30% of the time | {pct(m['accuracy'])} | {yes(0.1 <= m['accuracy'] <= 0.3)} |
| reflects about 5–15% of the time | {pct(m['reflection_rate'])} | {yes(0.05 <= m['reflection_rate'] <= 0.15)} |
| reflecting completions right more often | {pct(m['reflecting']['accuracy'])} vs {pct(m['not_reflecting']['accuracy'])} | {yes(better)} |

{diagnosis}

## Limits

No "aha" below ~100M parameters has been published, and this model is not evidence of one: it was
built to already show the behaviour (checking, "wait", retrying) sometimes, and GRPO can at best
select it more often. Longer answers alone prove nothing; judge a run by reflection rate together
with the accuracy of reflecting vs non-reflecting completions (docs/grpo.md §7). The model's arithmetic
is learned and imperfect: a check it gets wrong can stop on a wrong answer or reject a right one.
"""
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
