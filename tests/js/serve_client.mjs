// The official openai npm client (pinned in package-lock.json) against a
// running `./run MODEL -m serve`: node serve_client.mjs BASE_URL [API_KEY].
// Prints one JSON object with what each call returned; tests/test_serve.py
// checks it against the CLI's texts.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: apiKey || "none", maxRetries: 0, timeout: 60000 });
const out = {};

async function streamText(stream, chat) {
  let text = "", finish = null, chunks = 0, usage = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    text += chat ? (c.delta.content || "") : c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, chunks, usage };
}

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

const messages = [{ role: "user", content: "Tell me a story." }];
const chat = await client.chat.completions.create({ model: out.models[0], messages, temperature: 0, max_tokens: 40 });
out.chat = { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage,
             role: chat.choices[0].message.role, object: chat.object };

out.chat_stream = await streamText(await client.chat.completions.create({
  model: out.models[0], messages, temperature: 0, max_tokens: 40, stream: true,
  stream_options: { include_usage: true } }), true);

const prompt = "Once upon a time";
const cmpl = await client.completions.create({ model: out.models[0], prompt, temperature: 0, max_tokens: 40 });
out.completion = { text: cmpl.choices[0].text, finish: cmpl.choices[0].finish_reason, usage: cmpl.usage };
out.completion_stream = await streamText(await client.completions.create({
  model: out.models[0], prompt, temperature: 0, max_tokens: 40, stream: true }), false);

// a seed at temperature 1 (twice: the same text), and a stop string
const seeded = () => client.completions.create({ model: out.models[0], prompt, temperature: 1, top_p: 0.9, seed: 42,
                                                 max_tokens: 40 });
out.seeded = [(await seeded()).choices[0].text, (await seeded()).choices[0].text];
const stopped = await client.completions.create({ model: out.models[0], prompt, temperature: 0, max_tokens: 40,
                                                  stop: ["Lily", "park"] });
out.stopped = { text: stopped.choices[0].text, finish: stopped.choices[0].finish_reason };

// four clients at once, two streaming: each text as the same request alone
const prompts = ["Once upon a time", "The cat", "Tom and Sue went", "One day"];
const alone = [];
for (const p of prompts)
  alone.push((await client.completions.create({ model: out.models[0], prompt: p, temperature: 0, max_tokens: 60 })).choices[0].text);
const together = await Promise.all(prompts.map(async (p, i) => {
  if (i % 2) return (await streamText(await client.completions.create({
    model: out.models[0], prompt: p, temperature: 0, max_tokens: 60, stream: true }), false)).text;
  return (await client.completions.create({ model: out.models[0], prompt: p, temperature: 0, max_tokens: 60 })).choices[0].text;
}));
out.concurrent = { prompts, alone, together };

// an error as the client surfaces it
try {
  await client.chat.completions.create({ model: out.models[0], messages: [], max_tokens: 5 });
  out.error = null;
} catch (e) {
  out.error = { status: e.status, message: e.error && e.error.message };
}
console.log(JSON.stringify(out));
