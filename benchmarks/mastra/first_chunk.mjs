// first_chunk.py's workload through Mastra: µs from calling agent.stream to
// the first text-delta of its full stream (the rest read after the clock
// stops), `samples` runs per processor count on one agent per count, the
// counts taking turns run by run after `warmup` uncounted runs each.
import { agentWith, emit, params, passThroughs, textTurn } from './common.mjs';

const { samples, warmup, chunks, processors } = params;
const parts = textTurn(chunks);

async function firstChunk(agent) {
  const start = performance.now();
  let first;
  const output = await agent.stream('hi');
  for await (const chunk of output.fullStream) {
    if (first === undefined && chunk.type === 'text-delta') first = performance.now() - start;
  }
  if (first === undefined) throw new Error('the run streamed no text delta');
  return first * 1000;
}

const agents = new Map(processors.map(count => [count, agentWith(parts, passThroughs(count))]));
for (const agent of agents.values()) for (let i = 0; i < warmup; i++) await firstChunk(agent);
const us = Object.fromEntries(processors.map(count => [count, []]));
const order = [...agents];
for (let i = 0; i < samples; i++) {
  // Rotated each time, as on the Python side.
  const turn = [...order.slice(i % order.length), ...order.slice(0, i % order.length)];
  for (const [count, agent] of turn) us[count].push(await firstChunk(agent));
}
emit({ us });
