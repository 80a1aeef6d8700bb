// agent_stream.py's workload through Mastra: µs per chunk of a whole
// agent.stream run of `chunks` text deltas, with each count of async
// pass-through output processors. One warm-up run per set-up (so the JIT has
// compiled the hot path, as it would in a long-lived server), then one timed
// run per set-up; the Python driver calls this once per round.
import { agentWith, emit, params, passThroughs, textTurn, usPerChunk } from './common.mjs';

const { chunks, processors, warmup } = params;
const agents = new Map();
for (const count of processors) {
  agents.set(count, {
    warm: agentWith(textTurn(warmup), passThroughs(count)),
    timed: agentWith(textTurn(chunks), passThroughs(count)),
  });
}
for (const { warm } of agents.values()) await usPerChunk(warm, warmup);
const result = {};
for (const [count, { timed }] of agents) result[count] = await usPerChunk(timed, chunks);
emit({ us_per_chunk: result });
