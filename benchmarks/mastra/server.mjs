// Mastra 1.71's own HTTP server (@mastra/deployer's createNodeServer, the
// server `mastra build` ships) serving an agent with the same workload as
// benchmarks/_served.py: text deltas "x " through 5 async pass-through output
// processors. Prints "ready <port>" once it listens; runs until killed.
// Params: {"port"}.
import { Mastra } from '@mastra/core/mastra';
import { createNodeServer } from '@mastra/deployer/server';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV2 } from 'ai/test';
import { Agent } from '@mastra/core/agent';
import { params, passThroughs, textTurn } from './common.mjs';

// Each request says its workload in its message, as for _served.py:
// "chunks=200 pace=20" (200 deltas, 20 ms before each; chunks=1: one "ok").
const turns = new Map();
function partsFor(chunks) {
  if (!turns.has(chunks)) {
    const parts = textTurn(chunks);
    if (chunks === 1) parts[2] = { type: 'text-delta', id: 't', delta: 'ok' };
    turns.set(chunks, parts);
  }
  return turns.get(chunks);
}

function workload(prompt) {
  const users = prompt.filter((m) => m.role === 'user');
  const last = users.at(-1);
  const text = (last?.content ?? []).map((p) => p.text ?? '').join('');
  const match = /chunks=(\d+)(?: pace=([\d.]+))?/.exec(text);
  return match ? [Number(match[1]), Number(match[2] ?? 0)] : [200, 0];
}

const model = new MockLanguageModelV2({
  doStream: async ({ prompt }) => {
    const [chunks, paceMs] = workload(prompt);
    return {
      stream: simulateReadableStream({
        chunks: partsFor(chunks),
        initialDelayInMs: null,
        chunkDelayInMs: paceMs || null,
      }),
    };
  },
});

const agent = new Agent({
  id: 'load',
  name: 'load',
  instructions: 'bench',
  model,
  outputProcessors: passThroughs(5),
});

const mastra = new Mastra({
  agents: { load: agent },
  logger: false,
  server: { port: params.port, host: '127.0.0.1' },
});
await createNodeServer(mastra, { tools: {}, studio: false, swaggerUI: false });
console.log(`ready ${params.port}`);
