// io_overlap.py's workload through Mastra: `processors` async output
// processors, each awaiting setTimeout(`wait_ms`) on every `every`-th text
// delta and appending its index to that delta's text. Times, in seconds: the
// agent run with the waits, the same without them, and node's sequential floor
// (one loop awaiting the hooks on each part); `same_output` compares the
// agent's text with the floor's.
import { agentWith, drain, emit, params, textTurn } from './common.mjs';

const { chunks, processors, every, wait_ms: waitMs } = params;
const parts = textTurn(chunks);
const sleep = () => new Promise(resolve => setTimeout(resolve, waitMs));

class Waiting {
  constructor(index, wait) {
    this.id = `wait-${index}`;
    this.tag = String(index);
    this.wait = wait;
  }

  async processOutputStream({ part, state }) {
    if (part.type !== 'text-delta') return part;
    state.seen = (state.seen ?? 0) + 1;
    if (state.seen % every) return part;
    if (this.wait) await sleep();
    return { ...part, payload: { ...part.payload, text: part.payload.text + this.tag } };
  }
}

const chain = wait => Array.from({ length: processors }, (_, i) => new Waiting(i, wait));

async function timed(run) {
  const start = performance.now();
  const result = await run();
  return { seconds: (performance.now() - start) / 1000, result };
}

// The floor sees the parts as Mastra's processors do: text deltas carry
// payload.text.
async function sequential() {
  const hooks = chain(true);
  const states = hooks.map(() => ({}));
  let text = '';
  for (const raw of parts) {
    if (raw.type !== 'text-delta') continue;
    let part = { type: 'text-delta', payload: { id: raw.id, text: raw.delta } };
    for (let i = 0; i < hooks.length; i++) {
      part = await hooks[i].processOutputStream({ part, state: states[i] });
    }
    text += part.payload.text;
  }
  return text;
}

await drain(agentWith(textTurn(Math.min(chunks, 500)), chain(false))); // warm-up
const floor = await timed(sequential);
const waits = await timed(() => drain(agentWith(parts, chain(true))));
const nowait = await timed(() => drain(agentWith(parts, chain(false))));
emit({
  sequential: floor.seconds,
  waits: waits.seconds,
  nowait: nowait.seconds,
  same_output: waits.result.text === floor.result && nowait.result.text === floor.result,
});
