// The AI SDK's own chat (`AbstractChat` from `ai`, with a plain in-memory
// state, as `useChat` holds one) answering a waiting call: it sends a message,
// the stream stops at `tool-approval-request`, `addToolApprovalResponse`
// answers it and `sendAutomaticallyWhen:
// lastAssistantMessageIsCompleteWithApprovalResponses` sends the next request,
// whose stream goes on in the same assistant message. Prints one JSON object.
//
// Usage: node approve_chat.mjs <baseUrl> <agentId> approve|decline
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

const [base, agentId, how] = process.argv.slice(2);

class MemoryState {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) { this.messages = [...this.messages, message]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
  }
  snapshot(thing) { return structuredClone(thing); }
}

class Chat extends AbstractChat {
  constructor(options) { super({ ...options, state: new MemoryState() }); }
}

const requests = [];
const chat = new Chat({
  id: "chat-approval",
  transport: new DefaultChatTransport({
    api: `${base}/api/agents/${agentId}/chat`,
    body: { memory: { thread: "t-chat", resource: "ada" } },
    fetch: async (url, init) => { requests.push(JSON.parse(init.body)); return fetch(url, init); },
  }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
});

const errors = [];
chat.onError = (error) => errors.push(String(error));
await chat.sendMessage({ text: "delete record 42" });
const paused = structuredClone(chat.messages.at(-1));
const waiting = paused.parts.find((p) => p.state === "approval-requested");
await chat.addToolApprovalResponse({
  id: waiting.approval.id,
  approved: how === "approve",
  reason: how === "approve" ? undefined : "not today",
});
// The automatic request runs on its own: wait for it to finish.
for (let i = 0; i < 200 && (requests.length < 2 || chat.status !== "ready"); i++) {
  await new Promise((resolve) => setTimeout(resolve, 25));
}
const done = chat.messages;
console.log(
  JSON.stringify({
    status: chat.status,
    errors,
    requests: requests.length,
    pausedParts: paused.parts.map((p) => [p.type, p.state ?? null]),
    approvalId: waiting.approval.id,
    messages: done.map((m) => ({ id: m.id, role: m.role, parts: m.parts.map((p) => [p.type, p.state ?? null, p.output ?? p.text ?? null]) })),
  }),
);
