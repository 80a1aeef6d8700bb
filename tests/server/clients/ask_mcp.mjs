// @mastra/mcp's MCPClient against procession's /api/mcp: lists the tools,
// asks the agent, collects the progress notifications, and tries once more
// without the token.
// Usage: node ask_mcp.mjs <base-url> <token> <tool> <message>
import { MCPClient } from "@mastra/mcp";

const [baseUrl, token, tool, message] = process.argv.slice(2);
const client = (headers) =>
  new MCPClient({
    id: `procession-${Object.keys(headers).length}`,
    servers: {
      procession: {
        url: new URL(`${baseUrl}/api/mcp`),
        requestInit: { headers },
        enableProgressTracking: true,
        enableServerLogs: false,
        timeout: 20000,
      },
    },
  });

const mcp = client({ Authorization: `Bearer ${token}` });
const progress = [];
await mcp.progress.onUpdate("procession", (params) => progress.push(params.message));
const tools = await mcp.listTools();
const answer = await tools[`procession_${tool}`].execute({ message }, {});
await mcp.disconnect();

let refused = null;
const stranger = client({});
try {
  await stranger.listToolsWithErrors().then(({ errors }) => {
    refused = JSON.stringify(errors);
  });
} catch (error) {
  refused = String(error.message || error);
}
await stranger.disconnect();

console.log(
  JSON.stringify({
    tools: Object.keys(tools).sort(),
    schema: tools[`procession_${tool}`].inputSchema ? "present" : "absent",
    answer,
    progress,
    refused,
  }),
);
