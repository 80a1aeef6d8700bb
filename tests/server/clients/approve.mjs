// @mastra/client-js answering a run that waits for approval: streams a run to
// its `tool-call-approval`, lists the waiting runs, approves (or declines) the
// call and reads the continuation, then answers again (which must be refused
// with a 409, not retried). Prints one JSON object.
//
// Usage: node approve.mjs <baseUrl> <agentId> approve|decline
import { MastraClient } from "@mastra/client-js";

const [base, agentId, how] = process.argv.slice(2);
const client = new MastraClient({ baseUrl: base, retries: 0 });
const agent = client.getAgent(agentId);
const memory = { thread: "t-approve", resource: "ada" };

async function read(response) {
  const chunks = [];
  await response.processDataStream({ onChunk: async (chunk) => chunks.push(chunk) });
  return chunks;
}

const first = await read(await agent.stream("delete record 42", { memory }));
const waiting = first.at(-1);
const listed = await agent.listSuspendedRuns({ resourceId: "ada" });
const answer = { runId: waiting.runId, toolCallId: waiting.payload.toolCallId };
const response =
  how === "approve"
    ? await agent.approveToolCall(answer)
    : await agent.declineToolCall({ ...answer, reason: "not today" });
const second = await read(response);
let again;
try {
  await read(await agent.approveToolCall(answer));
  again = "accepted";
} catch (error) {
  again = String(error.message ?? error);
}
console.log(
  JSON.stringify({
    first: first.map((c) => c.type),
    waiting: waiting.payload,
    listed,
    second: second.map((c) => c.type),
    secondRunIds: [...new Set(second.map((c) => c.runId))],
    text: second.filter((c) => c.type === "text-delta").map((c) => c.payload.text).join(""),
    denied: second.find((c) => c.type === "tool-output-denied")?.payload ?? null,
    again,
  }),
);
