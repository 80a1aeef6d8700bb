// What the Mastra workloads share: a scripted model of the same chunks the
// Python side's ScriptedModel streams, pass-through output processors, and the
// JSON in/out protocol of benchmarks/_mastra.py (one JSON argument, one JSON
// line printed last).
import { Agent } from '@mastra/core/agent';
import { MockLanguageModelV2, convertArrayToReadableStream } from 'ai/test';

export const params = JSON.parse(process.argv[2] ?? '{}');

export function emit(result) {
  console.log(JSON.stringify(result));
}

// The model's stream parts for one turn of `chunks` text deltas "x ", built
// once (as the Python side builds its script before timing) and replayed on
// every call.
export function textTurn(chunks) {
  const parts = [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }];
  for (let i = 0; i < chunks; i++) parts.push({ type: 'text-delta', id: 't', delta: 'x ' });
  parts.push({ type: 'text-end', id: 't' });
  parts.push({
    type: 'finish',
    finishReason: 'stop',
    usage: { inputTokens: 1, outputTokens: chunks, totalTokens: chunks + 1 },
  });
  return parts;
}

// A MockLanguageModelV2 (the AI SDK's test model, as Mastra's agent tests use)
// that streams `parts` on every call, with no delay.
export function scriptedModel(parts) {
  return new MockLanguageModelV2({
    doStream: async () => ({ stream: convertArrayToReadableStream(parts) }),
  });
}

// Returns every chunk unchanged from an async stream hook, like
// procession.testing.PassThrough.
export class PassThrough {
  constructor(index) {
    this.id = `pass-${index}`;
  }

  async processOutputStream({ part }) {
    return part;
  }
}

export function passThroughs(count) {
  return Array.from({ length: count }, (_, i) => new PassThrough(i));
}

export function agentWith(parts, outputProcessors) {
  return new Agent({
    id: 'bench',
    name: 'bench',
    instructions: 'bench',
    model: scriptedModel(parts),
    outputProcessors,
  });
}

// One whole run: agent.stream, every chunk of its full stream read. Returns the
// chunk count and the text the client saw.
export async function drain(agent) {
  const output = await agent.stream('hi');
  let chunks = 0;
  let text = '';
  for await (const chunk of output.fullStream) {
    chunks++;
    if (chunk.type === 'text-delta') text += chunk.payload.text;
  }
  return { chunks, text };
}

export async function usPerChunk(agent, chunks) {
  const start = performance.now();
  await drain(agent);
  return ((performance.now() - start) * 1000) / chunks;
}

export function forceGc() {
  if (typeof globalThis.gc !== 'function') throw new Error('run node with --expose-gc');
  globalThis.gc();
  globalThis.gc();
}
