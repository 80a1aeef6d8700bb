// Reads procession's server with clients written by others: the AI SDK's own
// UI-message-stream reader (npm `ai`) and `@mastra/client-js`. For each agent
// id given, it assembles what each client shows and what `generate()` returns,
// and prints one JSON object for the Python test to compare.
//
// Usage: node read_streams.mjs <baseUrl> <agentId>...   (run from a directory
// whose node_modules has `ai` and `@mastra/client-js`).
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";
import { MastraClient } from "@mastra/client-js";

const [base, ...agentIds] = process.argv.slice(2);
const question = "Hi";

async function viaAiSdk(agentId) {
  const response = await fetch(`${base}/api/agents/${agentId}/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      id: `chat-${agentId}`,
      trigger: "submit-message",
      messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: question }] }],
    }),
  });
  const invalid = [];
  const chunks = parseJsonEventStream({
    stream: response.body,
    schema: uiMessageChunkSchema,
  }).pipeThrough(
    new TransformStream({
      transform(part, controller) {
        if (!part.success) {
          invalid.push(String(part.error));
          return;
        }
        controller.enqueue(part.value);
      },
    }),
  );
  let message;
  for await (const m of readUIMessageStream({ stream: chunks, terminateOnError: true })) {
    message = m;
  }
  const parts = message?.parts ?? [];
  return {
    headers: Object.fromEntries(response.headers),
    invalid,
    messageId: message?.id ?? null,
    text: parts.filter((p) => p.type === "text").map((p) => p.text).join(""),
    textStates: parts.filter((p) => p.type === "text").map((p) => p.state),
    tools: parts
      .filter((p) => p.type.startsWith("tool-"))
      .map((p) => ({ name: p.type.slice(5), state: p.state, input: p.input, output: p.output })),
    tripwire: parts.find((p) => p.type === "data-tripwire")?.data ?? null,
  };
}

async function viaMastra(client, agentId) {
  const agent = client.getAgent(agentId);
  const response = await agent.stream(question);
  const chunks = [];
  await response.processDataStream({ onChunk: async (chunk) => chunks.push(chunk) });
  return {
    types: chunks.map((c) => c.type),
    text: chunks.filter((c) => c.type === "text-delta").map((c) => c.payload.text).join(""),
    tools: chunks
      .filter((c) => c.type === "tool-result")
      .map((c) => ({ name: c.payload.toolName, input: c.payload.args, output: c.payload.result })),
    tripwire: chunks.find((c) => c.type === "tripwire")?.payload ?? null,
  };
}

async function viaGenerate(client, agentId) {
  const result = await client.getAgent(agentId).generate(question);
  return {
    text: result.text,
    finishReason: result.finishReason,
    tools: result.toolResults.map((c) => ({
      name: c.payload.toolName,
      input: c.payload.args,
      output: c.payload.result,
    })),
    tripwire: result.tripwire ?? null,
  };
}

const client = new MastraClient({ baseUrl: base, retries: 0 });
const out = { agents: Object.keys(await client.listAgents()) };
for (const agentId of agentIds) {
  out[agentId] = {
    aiSdk: await viaAiSdk(agentId),
    mastra: await viaMastra(client, agentId),
    generate: await viaGenerate(client, agentId),
  };
}
console.log(JSON.stringify(out));
