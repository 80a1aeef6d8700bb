// @mastra/client-js reads the memory routes: the token's threads, a thread,
// its messages, and (as another resource) someone else's thread.
// Usage: node read_memory.mjs <base-url> <token> <other-token> <agentId> <threadId>
import { MastraClient } from "@mastra/client-js";

const [baseUrl, token, otherToken, agentId, threadId] = process.argv.slice(2);
const client = (t) =>
  new MastraClient({ baseUrl, retries: 0, headers: { Authorization: `Bearer ${t}` } });
const mine = client(token);
const listing = await mine.listMemoryThreads({ agentId });
const thread = await mine.getMemoryThread({ threadId, agentId }).get();
const messages = await mine.listThreadMessages(threadId, { agentId });
let otherError = null;
try {
  await client(otherToken).listThreadMessages(threadId, { agentId });
} catch (error) {
  otherError = String(error.message || error);
}
console.log(
  JSON.stringify({
    threads: listing.threads.map((t) => ({ id: t.id, resourceId: t.resourceId })),
    total: listing.total,
    thread: { id: thread.id, resourceId: thread.resourceId },
    roles: messages.messages.map((m) => m.role),
    texts: messages.messages.map((m) =>
      (m.content.parts || []).filter((p) => p.type === "text").map((p) => p.text).join(""),
    ),
    otherError,
  }),
);
