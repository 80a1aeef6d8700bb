// long_stream.py's workload through Mastra: one agent.stream run per size in
// `sizes`, `processors` async pass-through output processors.
// measure "time": µs per chunk at each size (after a short warm-up run).
// measure "memory": at the one size, process.memoryUsage().heapUsed after a
// forced GC once the last chunk has been read while the run's output is still
// referenced ("held") and after it is dropped ("kept"), less heapUsed after a
// forced GC before the run, per chunk.
import { agentWith, emit, forceGc, params, passThroughs, textTurn, usPerChunk } from './common.mjs';

const { sizes, processors, measure } = params;

if (measure === 'time') {
  await usPerChunk(agentWith(textTurn(5000), passThroughs(processors)), 5000);
  const result = {};
  for (const size of sizes) {
    result[size] = await usPerChunk(agentWith(textTurn(size), passThroughs(processors)), size);
  }
  emit({ us_per_chunk: result });
} else {
  const [size] = sizes;
  const agent = agentWith(textTurn(size), passThroughs(processors));
  forceGc();
  const base = process.memoryUsage().heapUsed;
  let output = await agent.stream('hi');
  for await (const _ of output.fullStream);
  forceGc();
  const held = process.memoryUsage().heapUsed - base;
  output = undefined;
  forceGc();
  const kept = process.memoryUsage().heapUsed - base;
  // agent.id read last: the agent is alive through both measurements, as on the
  // Python side.
  emit({ held_bytes_per_chunk: held / size, kept_bytes_per_chunk: kept / size, agent: agent.id });
}
