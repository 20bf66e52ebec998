// train_grpo.py of the TRL export: GRPOConfig with every option the config maps, the dataset
// loader for train.jsonl / eval.jsonl, the prompt-length filter (TRL ≥ 0.28 has no
// max_prompt_length) and the per-device batch size that keeps B prompts per optimizer step on any
// number of GPUs.

import { pyStr } from './py-literal';

export interface TrainPyOptions {
  model: string;
  /** GRPOConfig keyword arguments, already as Python literals, in order. */
  grpoArgs: [string, string][];
  perStepPrompts: number;
  numGenerations: number;
  gradientAccumulationSteps: number;
  maxPromptLength: number;
  conversational: boolean;
  /** The chat template's keyword arguments (GRPOConfig's chat_template_kwargs, {} when unset) as a
   * Python literal: the prompt-length filter and the format reward render prompts with them. */
  chatTemplateKwargs: string;
  hasEval: boolean;
  /** In optimizer steps (the playground's evalSteps × numIterations). */
  evalSteps: number;
  /** num_generations_eval: the eval batch holds one prompt's completions per device. */
  evalGenerations: number;
  /** The run's LoRA settings (usePeft), passed to GRPOTrainer as a PEFT LoraConfig; null = full. */
  peft: PeftExport | null;
  /** from_pretrained's dtype for the frozen base under LoRA ('bfloat16' …); null = TRL's default. */
  modelDtype: string | null;
  /**
   * dtype 'nf4' under LoRA (QLoRA): the base loads 4-bit through a BitsAndBytesConfig, as TRL's
   * get_quantization_config builds it from load_in_4bit; `nested` is use_bnb_nested_quant.
   */
  quantization?: { nested: boolean } | null;
}

/**
 * BitsAndBytesConfig(...) as Python source: TRL ModelConfig's load_in_4bit with
 * bnb_4bit_quant_type "nf4", double quantisation as use_bnb_nested_quant, and f32 compute as the
 * playground's kernels compute (they dequantise to f32 in registers).
 */
export function bnbConfigPy(q: { nested: boolean }): string {
  return (
    'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", ' +
    `bnb_4bit_use_double_quant=${q.nested ? 'True' : 'False'}, bnb_4bit_compute_dtype=torch.float32)`
  );
}

/** PEFT LoraConfig keyword values, as the playground's LoRA options hold them. */
export interface PeftExport {
  r: number;
  alpha: number;
  dropout: number;
  /** 'all-linear' (PEFT's shorthand, a string there) or projection names. */
  targetModules: readonly string[];
  useRslora: boolean;
}

/** LoraConfig(...) as Python source; every value goes through a literal writer. */
function loraConfigPy(p: PeftExport, literal: (v: unknown) => string): string {
  const targets =
    p.targetModules.length === 1 && p.targetModules[0] === 'all-linear'
      ? literal('all-linear')
      : literal([...p.targetModules]);
  return (
    `LoraConfig(r=${literal(p.r)}, lora_alpha=${literal(p.alpha)}, lora_dropout=${literal(p.dropout)}, ` +
    `target_modules=${targets}, use_rslora=${literal(p.useRslora)}, task_type="CAUSAL_LM")`
  );
}

export function trainPy(o: TrainPyOptions, literal: (v: unknown) => string): string {
  // A 4-bit base: the BitsAndBytesConfig goes in model_init_kwargs as quantization_config, where
  // TRL's own scripts put get_quantization_config's result.
  const initKwargs: [string, string][] = o.quantization
    ? [['model_init_kwargs', `{"quantization_config": ${bnbConfigPy(o.quantization)}}`]]
    : o.modelDtype === null
      ? []
      : [['model_init_kwargs', literal({ dtype: o.modelDtype })]];
  const args = [...o.grpoArgs, ...initKwargs].map(([k, v]) => `        ${k}=${v},`).join('\n');
  // LoRA runs train adapters on a frozen base, as in the playground (PEFT's LoraConfig with the
  // same r, alpha, targets and scaling); without it TRL trains every weight.
  const peftImport = o.peft ? 'from peft import LoraConfig\n' : '';
  const torchImport = o.quantization ? 'import torch\n' : '';
  const bnbImport = o.quantization ? ', BitsAndBytesConfig' : '';
  const peftConfig = o.peft ? loraConfigPy(o.peft, literal) : 'None';
  const evalArgs = o.hasEval
    ? `        eval_strategy="steps",
        eval_steps=${o.evalSteps},
        per_device_eval_batch_size=${o.evalGenerations},
`
    : '';
  return String.raw`#!/usr/bin/env python3
"""GRPO run exported from GRPO Playground (see README.md for how to launch it).

One optimizer step uses PROMPTS_PER_STEP prompts x NUM_GENERATIONS completions, as in the playground,
whatever the number of GPUs: per_device_train_batch_size is derived from WORLD_SIZE below.
"""
import argparse
import os

from datasets import load_dataset
${torchImport}${peftImport}from transformers import AutoTokenizer${bnbImport}
from trl import GRPOConfig, GRPOTrainer

import rewards
from rewards import REWARD_FUNCS

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = ${pyStr(o.model)}
PROMPTS_PER_STEP = ${o.perStepPrompts}
NUM_GENERATIONS = ${o.numGenerations}
GRADIENT_ACCUMULATION_STEPS = ${o.gradientAccumulationSteps}
MAX_PROMPT_LENGTH = ${o.maxPromptLength}
CONVERSATIONAL = ${o.conversational ? 'True' : 'False'}
CHAT_TEMPLATE_KWARGS = ${o.chatTemplateKwargs}
HAS_EVAL = ${o.hasEval ? 'True' : 'False'}
PEFT_CONFIG = ${peftConfig}


def per_device_batch_size():
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    sequences = PROMPTS_PER_STEP * NUM_GENERATIONS
    if sequences % (world_size * GRADIENT_ACCUMULATION_STEPS) != 0:
        raise SystemExit(
            "PROMPTS_PER_STEP * NUM_GENERATIONS = %d sequences per step cannot be split over %d processes x %d "
            "accumulation steps; change the number of GPUs or PROMPTS_PER_STEP" % (sequences, world_size, GRADIENT_ACCUMULATION_STEPS)
        )
    return sequences // (world_size * GRADIENT_ACCUMULATION_STEPS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL, help="model name on the Hub or local path (default: %(default)s)")
    parser.add_argument("--output-dir", default=os.path.join(HERE, "output"))
    args = parser.parse_args()

    data_files = {"train": os.path.join(HERE, "train.jsonl")}
    if HAS_EVAL:
        data_files["eval"] = os.path.join(HERE, "eval.jsonl")
    dataset = load_dataset("json", data_files=data_files)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    # The format reward sees the think markup the chat template ends a prompt with (rewards.py).
    rewards.use_chat_template(tokenizer, CHAT_TEMPLATE_KWARGS)

    def prompt_fits(row):
        if CONVERSATIONAL:
            text = tokenizer.apply_chat_template(
                row["prompt"], tokenize=False, add_generation_prompt=True, **CHAT_TEMPLATE_KWARGS
            )
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tokenizer(row["prompt"])["input_ids"]
        return len(ids) <= MAX_PROMPT_LENGTH

    # The playground drops prompts longer than maxPromptLength tokens; TRL has no such option.
    dataset = dataset.filter(prompt_fits)

    training_args = GRPOConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=per_device_batch_size(),
${args}
        # The prompts are already in the playground's seeded order.
        shuffle_dataset=False,
        report_to="none",
${evalArgs}    )
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=REWARD_FUNCS,
        args=training_args,
        train_dataset=dataset["train"],
        eval_dataset=dataset["eval"] if HAS_EVAL else None,
        processing_class=tokenizer,
        peft_config=PEFT_CONFIG,
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
`;
}

/** Pinned versions: the latest releases when this template was written (trl 1.x line). */
export const PINNED = {
  trl: '1.16.0',
  transformers: '5.23.0',
  accelerate: '1.15.0',
  datasets: '5.2.0',
  peft: '0.21.2',
  torch: '2.15.0',
  deepspeed: '0.19.8',
  mathVerify: '0.9.0',
  /** A lower bound, not a pin: the 4-bit loader transformers needs (NF4 bases only). */
  bitsandbytesMin: '0.46.1',
} as const;

export function requirementsTxt(options: { peft?: boolean; bitsandbytes?: boolean } = {}): string {
  return `# Pinned versions for the exported GRPO run.
trl==${PINNED.trl}
transformers==${PINNED.transformers}
accelerate==${PINNED.accelerate}
datasets==${PINNED.datasets}
${options.peft ? `peft==${PINNED.peft}\n` : ''}${options.bitsandbytes ? `# dtype nf4: the 4-bit (NF4) base is loaded through bitsandbytes (CUDA).\nbitsandbytes>=${PINNED.bitsandbytesMin}\n` : ''}torch==${PINNED.torch}
# Optional, only for accelerate_zero2.yaml (DeepSpeed ZeRO-2):
# deepspeed==${PINNED.deepspeed}
# Optional, for datasets with the math checker: rewards.py then asks math_verify, as TRL's
# accuracy_reward does (GRPO_MATH_CHECKER=rules keeps the playground's own rules; docs/math-checker.md):
# math-verify[antlr4_13_2]==${PINNED.mathVerify}
`;
}

export function accelerateConfigYaml(processes: number): string {
  return `# Multi-GPU data parallel on one machine: accelerate launch --config_file accelerate_config.yaml train_grpo.py
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_machines: 1
machine_rank: 0
num_processes: ${processes}
gpu_ids: all
mixed_precision: bf16
rdzv_backend: static
same_network: true
use_cpu: false
downcast_bf16: 'no'
`;
}

export function accelerateZero2Yaml(processes: number): string {
  return `# DeepSpeed ZeRO-2 (pip install deepspeed): accelerate launch --config_file accelerate_zero2.yaml train_grpo.py
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  deepspeed_multinode_launcher: standard
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
num_machines: 1
machine_rank: 0
num_processes: ${processes}
mixed_precision: bf16
rdzv_backend: static
same_network: true
use_cpu: false
downcast_bf16: 'no'
`;
}
