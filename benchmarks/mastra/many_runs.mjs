// many_runs.py's workload through Mastra: `runs` concurrent agent.stream runs
// on one agent, each `chunks` text deltas through `processors` async
// pass-through output processors. A warm-up pass, a timed pass, then a memory
// pass: node has no tracemalloc, so "KiB per run" here is the peak of
// process.memoryUsage().heapUsed (sampled every 1,000th hook call) minus
// heapUsed after a forced GC before the runs start, over `runs`. heapUsed
// counts garbage not yet collected, so it is an upper bound of what is held.
import { PassThrough, agentWith, drain, emit, forceGc, params, passThroughs, textTurn } from './common.mjs';

const { runs, chunks, processors } = params;
const parts = textTurn(chunks);

async function allRuns(agent, count) {
  await Promise.all(Array.from({ length: count }, () => drain(agent)));
}

let peak = 0;
let calls = 0;
class Sampling extends PassThrough {
  async processOutputStream({ part }) {
    if (++calls % 1000 === 0) peak = Math.max(peak, process.memoryUsage().heapUsed);
    return part;
  }
}

await allRuns(agentWith(parts, passThroughs(processors)), Math.min(runs, 100));
const timed = agentWith(parts, passThroughs(processors));
forceGc();
const start = performance.now();
await allRuns(timed, runs);
const seconds = (performance.now() - start) / 1000;

const traced = agentWith(parts, [new Sampling(0), ...passThroughs(processors).slice(1)]);
forceGc();
const base = process.memoryUsage().heapUsed;
peak = base;
await allRuns(traced, runs);
emit({ chunks_per_second: (runs * chunks) / seconds, kib_per_run: (peak - base) / runs / 1024 });
