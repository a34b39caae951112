// OpenAI's own Node client (npm `openai`, pinned in scripts/install-deps.sh)
// against mf-serve: completions and chat, streamed and not, greedy.
// Usage: node openai_client.js NODE_MODULES BASE_URL MODEL PROMPT CHAT_MESSAGE
// Prints one JSON object: what each call returned.
const path = require('path');
const [nodeModules, baseURL, model, prompt, chatMessage] = process.argv.slice(2);
const OpenAI = require(path.join(nodeModules, 'openai'));

async function main() {
  const client = new OpenAI({baseURL, apiKey: 'unused', maxRetries: 0});
  const result = {};
  const models = await client.models.list();
  result.models = models.data.map((m) => m.id);

  const completion = await client.completions.create(
      {model, prompt, max_tokens: 12, temperature: 0});
  result.completion = completion.choices[0].text;
  result.completionFinish = completion.choices[0].finish_reason;
  result.completionUsage = completion.usage;

  let streamed = '';
  let streamFinish = null;
  const stream = await client.completions.create(
      {model, prompt, max_tokens: 12, temperature: 0, stream: true});
  for await (const chunk of stream) {
    streamed += chunk.choices[0].text;
    streamFinish = chunk.choices[0].finish_reason || streamFinish;
  }
  result.completionStreamed = streamed;
  result.completionStreamFinish = streamFinish;

  const messages = [{role: 'user', content: chatMessage}];
  const chat = await client.chat.completions.create(
      {model, messages, max_tokens: 10, temperature: 0});
  result.chat = chat.choices[0].message.content;
  result.chatRole = chat.choices[0].message.role;

  let chatStreamed = '';
  const chatStream = await client.chat.completions.create(
      {model, messages, max_tokens: 10, temperature: 0, stream: true});
  for await (const chunk of chatStream) {
    chatStreamed += chunk.choices[0]?.delta?.content || '';
  }
  result.chatStreamed = chatStreamed;

  try {
    await client.chat.completions.create(
        {model, messages: [{role: 'wizard', content: 'hi'}], max_tokens: 2});
    result.badRole = 'accepted';
  } catch (error) {
    result.badRole = `${error.status}: ${error.error?.message}`;
  }
  console.log(JSON.stringify(result));
}

main().catch((error) => {
  console.error(`openai client: ${error.stack || error}`);
  process.exit(1);
});
