// The trainer worker's evaluation service: chat with the current weights (a task prompt scored by
// the task's own verifier) and the before/after comparison on the run's held-out prompts.
import { evaluate, samplingEvalOptions, type EvalReport } from '../train/evaluate';
import { extractAnswer } from '../rewards/rewards';
import { Sampler } from '../model/sampler';
import { problemForMessage } from '../tasks/chat-problem';
import { checkChatLength, sampleChatReply } from './chat';
import type { WorkerContext } from './context';
import { COMPARE_PROMPTS, COMPARE_SAMPLES } from './protocol';
import type { ChatOptions, ChatReply, Comparison } from './protocol';

export function evaluationService(ctx: WorkerContext) {
  return {
    async chat(text: string, opts: ChatOptions): Promise<ChatReply> {
      const r = ctx.requireRun().run;
      ctx.requireIdle('Pause training to chat with the model.');
      const model = ctx.requireModel();
      const tokenizer = model.tokenizer;
      let prompt = text;
      let ids: number[];
      if (opts.useTemplate) {
        const rendered = r.trainer.renderPrompt({
          id: 'chat',
          task: r.task.name,
          question: text,
          reference: null,
          verifier: { kind: 'none' },
        });
        prompt = rendered.text;
        ids = rendered.ids;
      } else {
        ids = tokenizer.encode(text);
      }
      const maxPositions = model.hf.config.maxPositions;
      checkChatLength(ids, maxPositions);
      const maxNew = Math.max(1, Math.min(opts.maxNewTokens, maxPositions - ids.length));
      const reply = await sampleChatReply(r.trainer.sampler, tokenizer, prompt, ids, opts, maxNew);
      // A task prompt is scored by the task's own verifier, as a training completion would be.
      const problem = problemForMessage(text, r.task, r.trainer.evalProblems);
      if (problem) {
        const answer = extractAnswer(reply.text);
        const correct = answer === null ? false : r.task.verify(answer, problem);
        reply.score = { answer, correct, reference: problem.reference };
      }
      return reply;
    },

    /** The base weights and the current ones on the same held-out prompts and draws. */
    async compare(prompts = COMPARE_PROMPTS): Promise<Comparison> {
      const r = ctx.requireRun().run;
      ctx.requireIdle('Pause training to compare.');
      if (!(Number.isInteger(prompts) && prompts >= 1))
        throw new RangeError(`Compare needs a whole number of prompts ≥ 1, got ${prompts}.`);
      const problems = r.trainer.evalProblems.slice(0, prompts);
      if (problems.length === 0)
        throw new Error('This run has no held-out prompts (evalPrompts = 0).');
      const evalContext = r.evalContext;
      const evalOptions = samplingEvalOptions(r.config, COMPARE_SAMPLES, r.config.seed);
      const policy = r.trainer.policy;
      let before: EvalReport;
      if (policy.lora) {
        // LoRA: the base is the same weights with the adapters off (swapping base weights in
        // would leave the adapters on).
        const base = new Sampler(await ctx.getEngine(), policy, { adapters: false });
        before = await evaluate({ ...evalContext, sampler: base }, problems, evalOptions);
        const after = await evaluate(evalContext, problems, evalOptions);
        return { step: r.trainer.step, before, after };
      }
      const current = await policy.readParameters();
      try {
        // The base weights streamed from the model's files, a tensor at a time.
        const { weights } = ctx.requireModel().hf;
        await policy.parameters.uploadStreamed((name) => weights.read(name));
        before = await evaluate(evalContext, problems, evalOptions);
      } finally {
        policy.writeParameters(current);
      }
      const after = await evaluate(evalContext, problems, evalOptions);
      return { step: r.trainer.step, before, after };
    },
  };
}
