// The DeepSeek-V4 chat path of `strata serve` against external oracles (tests/server/deepseek4_npm.sh):
//   1. conversations rendered by @huggingface/jinja from llama.cpp's deepseek-ai-DeepSeek-V4.jinja and
//      by strata's /apply-template (the prompt its chat route runs) must be the same strings;
//   2. the official `openai` client's chat.completions.create, non-streamed and streamed, against
//      `strata serve -m DIR` on a DeepSeek-V4.1 checkpoint directory (SPARSE_DIR's files + a
//      tokenizer.json of 256 tokens written here), whose chat format must be deepseek4.
// Usage: node deepseek4_npm.mjs STRATA CACHE TEMPLATE WORK SMOKE_GGUF [SPARSE_DIR]
// Without SPARSE_DIR the templates are compared on SMOKE_GGUF with --chat-template deepseek4.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { startServer as startStrata } from "./strata_serve.mjs";

const [strata, cache, tmplPath, work, smoke, sparse] = process.argv.slice(2);
if (!strata || !cache || !tmplPath || !work || !smoke) {
  console.error("usage: node deepseek4_npm.mjs STRATA CACHE TEMPLATE WORK SMOKE_GGUF [SPARSE_DIR]");
  process.exit(2);
}
const entry = (dir, file) => pathToFileURL(path.join(cache, dir, "package", file)).href;
const { Template } = await import(entry("hf-jinja", "dist/index.js"));
const { default: OpenAI } = await import(entry("openai", "index.mjs"));
const t0 = Date.now();

// ---- the model: a V4.1 checkpoint directory, or the smoke GGUF with the format named ----
const BOS = "<｜begin▁of▁sentence｜>", EOS = "<｜end▁of▁sentence｜>";
function writeCheckpoint(dir) {
  fs.mkdirSync(dir, { recursive: true });
  for (const f of ["config.json", "model.safetensors", "engram_meta.json"]) fs.symlinkSync(path.join(sparse, f), path.join(dir, f));
  const nVocab = JSON.parse(fs.readFileSync(path.join(sparse, "config.json"), "utf8")).vocab_size;
  // Byte-level BPE of exactly nVocab ids: DeepSeek's control tokens, printable ASCII (as ByteLevel
  // writes bytes), space / newline, <unk>, then merges ("Ġx", frequent letter pairs) to fill it.
  const specials = [BOS, EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"];
  const vocab = {};
  specials.forEach((s, i) => { vocab[s] = i; });
  for (let c = 0x21; c <= 0x7e; ++c) vocab[String.fromCharCode(c)] = Object.keys(vocab).length;
  for (const s of ["\u0120", "\u010a", "<unk>"]) vocab[s] = Object.keys(vocab).length;
  const merges = [];
  const letters = "etaoinshrdlucmfwypvbgkjqxzETAOINSHRDLUCMFWYPVBGKJQXZ";
  const candidates = [...letters].map((c) => ["\u0120", c]);
  for (const a of "etaoinshr") for (const b of "etaoinshrdlu") candidates.push([a, b]);
  for (const [a, b] of candidates) {
    if (Object.keys(vocab).length >= nVocab) break;
    vocab[a + b] = Object.keys(vocab).length;
    merges.push(`${a} ${b}`);
  }
  const added = specials.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: id < 2 }));
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify({
    version: "1.0", added_tokens: added, normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null, decoder: { type: "ByteLevel" },
    model: { type: "BPE", unk_token: "<unk>", vocab, merges },
  }));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"),
    JSON.stringify({ add_bos_token: true, bos_token: BOS, eos_token: EOS }));
  return Object.keys(vocab).length;
}

const startServer = (args) => startStrata(strata, [...args, "-np", "1", "-t", "1"]);

let model, nVocab = 0;
if (sparse) {
  model = path.join(work, "ckpt");
  nVocab = writeCheckpoint(model);
}
const server = await startServer(sparse ? ["-m", model, "-c", "256"] : ["-m", smoke, "--chat-template", "deepseek4", "-c", "512"]);
const base = `http://127.0.0.1:${server.port}`;
let failed = 0;
const fail = (msg) => { console.error("FAIL: " + msg); failed = 1; };
if (!/chat format deepseek4/.test(server.log())) fail("the server did not pick the deepseek4 chat format:\n" + server.log());
const post = async (route, body) => {
  const r = await fetch(base + route, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
};

// ---- 1. the template: @huggingface/jinja vs /apply-template ----
const weather = { type: "function", function: { name: "get_weather", description: "Weather for a city, \"now\" or later.",
  parameters: { type: "object", properties: { city: { type: "string", description: "City name, e.g. Zürich" },
    days: { type: "integer", minimum: 1 }, units: { type: "string", enum: ["C", "F"] } }, required: ["city"] } } };
const search = { type: "function", function: { name: "search", description: "Search the web 🌐",
  parameters: { type: "object", properties: { q: { type: "string" }, top: { type: "number" },
    filters: { type: "object", properties: { site: { type: "string" }, safe: { type: "boolean" } } } }, required: ["q"] } } };
const now = { type: "function", function: { name: "now", description: "The time.", parameters: { type: "object", properties: {} } } };
const call = (id, name, args) => ({ id, type: "function", function: { name, arguments: args } });
const convs = [
  { name: "one user turn", messages: [{ role: "user", content: "Hello!" }] },
  { name: "system + user, thinking", thinking: true,
    messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "2+2?" }] },
  { name: "two systems, multi-turn", messages: [{ role: "system", content: "S1" }, { role: "user", content: "a" },
    { role: "assistant", content: "b" }, { role: "system", content: "S2" }, { role: "user", content: "c" }] },
  { name: "multi-turn reasoning, thinking", thinking: true, messages: [{ role: "user", content: "Q1" },
    { role: "assistant", content: "A1", reasoning_content: "R1" }, { role: "user", content: "Q2" },
    { role: "assistant", content: "A2", reasoning_content: "R2" }] },
  { name: "multi-turn reasoning, thinking off", messages: [{ role: "user", content: "Q1" },
    { role: "assistant", content: "A1", reasoning_content: "R1" }, { role: "user", content: "Q2" }] },
  { name: "developer and user runs", messages: [{ role: "developer", content: "Be kind." }, { role: "user", content: "x" },
    { role: "user", content: "y\n\nz" }, { role: "assistant", content: "" }, { role: "user", content: "  spaces  " }] },
  { name: "tools, no system", tools: [weather], messages: [{ role: "user", content: "Weather in Oslo?" }] },
  { name: "tools + system, thinking, reasoning kept", thinking: true, tools: [weather, search],
    messages: [{ role: "system", content: "Use tools." }, { role: "user", content: "Q1" },
      { role: "assistant", content: "A1", reasoning_content: "R1" }, { role: "user", content: "Q2" }] },
  { name: "call, result, answer", tools: [weather], messages: [{ role: "user", content: "Weather?" },
    { role: "assistant", content: null, tool_calls: [call("c1", "get_weather", { city: "Oslo", days: 3, units: "C" })] },
    { role: "tool", tool_call_id: "c1", content: "{\"temp\": -2}" }, { role: "assistant", content: "It is -2 C." },
    { role: "user", content: "Thanks" }] },
  { name: "non-string arguments", tools: [search], messages: [{ role: "user", content: "find" },
    { role: "assistant", content: "Searching.", tool_calls: [call("c1", "search",
      { q: "a \"quoted\" <b>", top: 2.5, filters: { site: "例え.jp", safe: true }, tags: ["x", 1, null, false] })] },
    { role: "tool", content: "[]" }] },
  { name: "call without arguments", tools: [now], messages: [{ role: "user", content: "time?" },
    { role: "assistant", content: "", tool_calls: [call("c1", "now", {})] }, { role: "tool", content: "12:00" }] },
  { name: "parallel calls, results merged, thinking, no tools", thinking: true, messages: [
    { role: "system", content: "S" }, { role: "user", content: "Oslo and Rome?" },
    { role: "assistant", content: "", reasoning_content: "Two cities.", tool_calls: [
      call("a", "get_weather", { city: "Oslo" }), call("b", "get_weather", { city: "Rome", days: 1 })] },
    { role: "tool", tool_call_id: "a", content: "cold" }, { role: "tool", tool_call_id: "b", content: "warm" },
    { role: "assistant", content: "Oslo is cold, Rome warm.", reasoning_content: "Summarise." }, { role: "user", content: "ok" }] },
  { name: "ends with an assistant turn, thinking", thinking: true, messages: [{ role: "user", content: "hi" },
    { role: "assistant", content: "hello", reasoning_content: "greet" }] },
  { name: "no user turn, thinking", thinking: true, messages: [{ role: "system", content: "S" },
    { role: "assistant", content: "a", reasoning_content: "r" }] },
  { name: "unicode and markup", messages: [{ role: "system", content: "中文系统 🚀" },
    { role: "user", content: "Ünïcödé <think> </think> <｜User｜> \t tabs\r\n" }] },
  { name: "maximum reasoning effort, thinking", thinking: true, effort: "max",
    messages: [{ role: "system", content: "S" }, { role: "user", content: "Prove it." }] },
  { name: "maximum reasoning effort, thinking off", effort: "max", messages: [{ role: "user", content: "Prove it." }] },
  { name: "high reasoning effort, thinking", thinking: true, effort: "high", messages: [{ role: "user", content: "Q" }] },
  { name: "tools, calls and thinking together", thinking: true, tools: [weather, now], messages: [
    { role: "user", content: "Plan" }, { role: "assistant", content: "", reasoning_content: "need time", tool_calls: [call("t", "now", {})] },
    { role: "tool", content: "9:00" }, { role: "assistant", content: "", reasoning_content: "and weather",
      tool_calls: [call("w", "get_weather", { city: "Paris", units: "F" })] }, { role: "tool", content: "sunny" }] },
];
const template = new Template(fs.readFileSync(tmplPath, "utf8"));
let same = 0;
for (const c of convs) {
  // The template reads arguments as objects (its from_json branch turns strings into them); the
  // server gets them as OpenAI sends them, JSON strings.
  const ctx = { messages: c.messages, tools: c.tools, thinking: !!c.thinking, add_generation_prompt: true, bos_token: "" };
  if (c.effort) ctx.reasoning_effort = c.effort;
  const want = template.render(ctx);
  const body = {
    messages: c.messages.map((m) => m.tool_calls ? { ...m, tool_calls: m.tool_calls.map((t) =>
      ({ ...t, function: { ...t.function, arguments: JSON.stringify(t.function.arguments) } })) } : m),
    chat_template_kwargs: { thinking: !!c.thinking },
  };
  if (c.effort) body.chat_template_kwargs.reasoning_effort = c.effort;
  if (c.tools) body.tools = c.tools;
  const got = await post("/apply-template", body);
  if (got.status !== 200) { fail(`${c.name}: /apply-template answered ${got.status}: ${JSON.stringify(got.body)}`); continue; }
  if (got.body.prompt === want) { ++same; continue; }
  let i = 0;
  while (i < want.length && want[i] === got.body.prompt[i]) ++i;
  fail(`${c.name}: strata's prompt differs from @huggingface/jinja's at char ${i}:\n  jinja  ${JSON.stringify(want.slice(Math.max(0, i - 60), i + 60))}\n` +
    `  strata ${JSON.stringify(got.body.prompt.slice(Math.max(0, i - 60), i + 60))}`);
}
console.log(`DeepSeek-V4 template (llama.cpp v0.5.0) via @huggingface/jinja vs strata /apply-template: ${same} / ${convs.length} conversations the same`);

// ---- 2. the openai client against `serve -m DIR` (V4.1 checkpoint) ----
if (sparse) {
  const client = new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0, timeout: 60000 });
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hi to the sea." }];
  const ids = await post("/tokenize", { messages, add_special_tokens: true });
  const rendered = await post("/apply-template", { messages });
  const want = template.render({ messages, add_generation_prompt: true, bos_token: BOS });
  if (BOS + rendered.body.prompt !== want) fail(`V4.1 /apply-template: ${JSON.stringify(rendered.body)} vs ${JSON.stringify(want)}`);
  const req = { model: "strata", messages, max_tokens: 12, temperature: 0, seed: 7 };
  const r = await client.chat.completions.create(req);
  const ch = r.choices?.[0];
  const text = ch?.message?.content;
  if (r.object !== "chat.completion" || r.choices.length !== 1 || ch.message.role !== "assistant" || typeof text !== "string" ||
    !["stop", "length"].includes(ch.finish_reason))
    fail("non-streamed answer is not a chat completion: " + JSON.stringify(r));
  if (r.usage?.prompt_tokens !== ids.body.count || !(r.usage?.completion_tokens > 0) ||
    r.usage.total_tokens !== r.usage.prompt_tokens + r.usage.completion_tokens)
    fail(`usage ${JSON.stringify(r.usage)}: the prompt is ${ids.body.count} tokens`);
  // Streamed: the same greedy text, in chunks, the usage last.
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let streamed = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.object !== "chat.completion.chunk") fail("chunk " + JSON.stringify(chunk));
    for (const c of chunk.choices) {
      streamed += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  if (streamed !== text || finish !== ch.finish_reason || usage?.completion_tokens !== r.usage.completion_tokens)
    fail(`streamed ${JSON.stringify(streamed)} (${finish}, ${JSON.stringify(usage)}, ${chunks} chunks) vs ${JSON.stringify(text)} (${ch.finish_reason})`);
  // Thinking on through the client's extra body field: the reply opens in the reasoning block.
  const think = await client.chat.completions.create({ ...req, max_tokens: 4, chat_template_kwargs: { thinking: true } });
  if (think.usage?.prompt_tokens !== ids.body.count) fail("thinking prompt: " + JSON.stringify(think.usage));
  // A prompt beyond the context is the client's BadRequestError naming the problem.
  let refused = null;
  try {
    await client.chat.completions.create({ ...req, messages: [{ role: "user", content: "word ".repeat(400) }] });
  } catch (e) {
    refused = e;
  }
  if (!(refused instanceof OpenAI.BadRequestError)) fail("an over-long prompt was not a 400: " + refused);
  console.log(`openai@6 client vs strata serve -m <V4.1 checkpoint> (tokenizer of ${nVocab} ids): ${JSON.stringify(text)} ` +
    `(${r.usage.prompt_tokens} + ${r.usage.completion_tokens} tokens, ${ch.finish_reason}), streamed in ${chunks} chunks: ` +
    (streamed === text ? "same" : "different"));
}

server.proc.removeAllListeners("exit");
const exited = new Promise((res) => server.proc.on("exit", (code, sig) => res(code ?? sig)));
server.proc.kill("SIGTERM");
const code = await exited;
if (code !== 0) fail(`strata serve exited with ${code} on SIGTERM:\n${server.log()}`);
console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed);
