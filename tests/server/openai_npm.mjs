// `strata serve` through the official `openai` npm client, one check per feature (tests/server/openai_npm.sh):
//   1. logprobs: completions (echo + max_tokens 0 scoring, and greedy generation with logprobs 5) and
//      chat (logprobs + top_logprobs 20): every token's logprob and its alternatives equal log_softmax
//      of `strata logits` rows (f32 KV on both sides) within 1e-5;
//   2. n = 4: one request's choices equal the n = 1 requests with seeds s + i (completions and chat,
//      streamed and not), the prompt counted once;
//   3. structured output: RUNS seeded chat requests over 30 JSON schemas (response_format json_schema,
//      max_tokens 256): at least 95% stop, and every one that stops validates (a validator written here
//      for the keywords strata supports);
//   4. tool calls in each named syntax (--chat-template chatml, llama3, mistral-v7, deepseek4, gpt-oss):
//      a named function and `required`, streamed (deltas accumulated as the client's users do) and not,
//      the same call both ways, arguments that parse as JSON with the tool's required keys, and the
//      round trip (the call and a tool result sent back) answered.
// Usage: node openai_npm.mjs STRATA CACHE MODEL WORK RUNS
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { startServer as startStrata, stopServer } from "./strata_serve.mjs";

const [strata, cache, modelPath, work, runsArg] = process.argv.slice(2);
if (!strata || !cache || !modelPath || !work) {
  console.error("usage: node openai_npm.mjs STRATA CACHE MODEL WORK [RUNS]");
  process.exit(2);
}
const RUNS = Number(runsArg || 100);
const { default: OpenAI } = await import(pathToFileURL(path.join(cache, "openai", "package", "index.mjs")).href);
const t0 = Date.now();
let failed = 0;
const fail = (msg) => { console.error("FAIL: " + msg); failed = 1; };

const startServer = (args) => startStrata(strata, ["-m", modelPath, "-t", "2", ...args]);
const stop = stopServer;
const clientOf = (s) => new OpenAI({ apiKey: "none", baseURL: `http://127.0.0.1:${s.port}/v1`, maxRetries: 0, timeout: 120000 });
const postOf = (s) => async (route, body) => {
  const r = await fetch(`http://127.0.0.1:${s.port}${route}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return r.json();
};
// Runs fn over items, `width` at a time.
async function pool(items, width, fn) {
  const out = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    for (let i; (i = next++) < items.length;) out[i] = await fn(items[i], i);
  }));
  return out;
}

// ---- `strata logits`: log_softmax rows and greedy continuations ----
let nLogitsRuns = 0;
function logSoftmaxRows(ids) {
  const out = path.join(work, `logits${nLogitsRuns++}.f32`);
  const r = spawnSync(strata, ["logits", "-m", modelPath, "--tokens", ids.join(","), "-o", out, "-t", "1"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`strata logits failed: ${r.stderr}`);
  const buf = fs.readFileSync(out);
  const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
  const nv = all.length / ids.length;
  const rows = [];
  for (let t = 0; t < ids.length; ++t) {
    const row = all.subarray(t * nv, (t + 1) * nv);
    let mx = -Infinity;
    for (const v of row) mx = Math.max(mx, v);
    let s = 0;
    for (const v of row) s += Math.exp(v - mx);
    const lse = mx + Math.log(s);
    rows.push(Float64Array.from(row, (v) => v - lse));
  }
  return rows;
}
const argmax = (row) => row.reduce((b, v, i) => (v > row[b] ? i : b), 0);
const topValues = (row, k) => Array.from(row).sort((a, b) => b - a).slice(0, k);
// The greedy continuation of `ids` for n tokens, and the log_softmax row each token was chosen from.
function greedy(ids, n) {
  const seq = [...ids], rows = [];
  for (let i = 0; i < n; ++i) {
    const r = logSoftmaxRows(seq);
    const row = r[r.length - 1];
    rows.push(row);
    seq.push(argmax(row));
  }
  return { ids: seq.slice(ids.length), rows };
}
let maxDiff = 0, compared = 0;
function near(got, want, what) {
  const d = Math.abs(got - want);
  maxDiff = Math.max(maxDiff, d);
  ++compared;
  if (!(d <= 1e-5)) fail(`${what}: logprob ${got} vs log_softmax of strata logits ${want} (|d| ${d})`);
}
function nearTop(got, row, k, what) {
  const want = topValues(row, k);
  const vals = got.slice().sort((a, b) => b - a);
  if (vals.length !== k) return fail(`${what}: ${vals.length} alternatives, want ${k}`);
  vals.forEach((v, i) => near(v, want[i], `${what} alternative ${i}`));
}

// ---- 1, 2, 3 on one server: f32 KV so that `strata logits` (f32 KV) is the same computation ----
const server = await startServer(["--kv-type", "f32", "-np", "16", "-c", "512"]);
const client = clientOf(server), post = postOf(server);
const model = "strata";
try {
  // 1a. completions: echo scoring of a prompt given as token ids
  const ids = (await post("/tokenize", { content: "the river of time and a small house stood near the old road", add_special: true })).tokens;
  const rows = logSoftmaxRows(ids);
  const echo = await client.completions.create({ model, prompt: ids, max_tokens: 0, echo: true, logprobs: 5 });
  const lp = echo.choices[0].logprobs;
  if (lp.token_logprobs.length !== ids.length || lp.token_logprobs[0] !== null) fail(`echo: ${lp.token_logprobs.length} entries for ${ids.length} tokens`);
  for (let i = 1; i < ids.length; ++i) {
    near(lp.token_logprobs[i], rows[i - 1][ids[i]], `echo token ${i}`);
    nearTop(Object.values(lp.top_logprobs[i]), rows[i - 1], 5, `echo token ${i}`);
  }
  // 1b. completions: greedy generation with logprobs 5
  const g = greedy(ids, 6);
  const gen = await client.completions.create({ model, prompt: ids, max_tokens: 6, temperature: 0, logprobs: 5 });
  const glp = gen.choices[0].logprobs;
  const gtext = (await post("/detokenize", { tokens: g.ids })).content;
  if (gen.choices[0].text !== gtext) fail(`greedy text ${JSON.stringify(gen.choices[0].text)} vs strata logits' argmax path ${JSON.stringify(gtext)}`);
  g.rows.forEach((row, j) => {
    near(glp.token_logprobs[j], row[g.ids[j]], `generated token ${j}`);
    nearTop(Object.values(glp.top_logprobs[j]), row, 5, `generated token ${j}`);
  });
  // 1c. chat: logprobs + top_logprobs 20, streamed and not
  const messages = [{ role: "system", content: "You are brief." }, { role: "user", content: "Tell me about the river." }];
  const prompt = (await post("/apply-template", { messages })).prompt;
  const cids = (await post("/tokenize", { content: prompt, add_special: true, parse_special: true })).tokens;
  const cg = greedy(cids, 5);
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 20 });
  const content = chat.choices[0].logprobs.content;
  if (content.length !== 5) fail(`chat logprobs: ${content.length} entries for 5 tokens`);
  cg.rows.forEach((row, j) => {
    near(content[j].logprob, row[cg.ids[j]], `chat token ${j}`);
    nearTop(content[j].top_logprobs.map((t) => t.logprob), row, 20, `chat token ${j}`);
  });
  const streamed = [];
  for await (const ch of await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 20, stream: true }))
    for (const e of ch.choices[0]?.logprobs?.content ?? []) streamed.push(e.logprob);
  cg.rows.forEach((row, j) => near(streamed[j], row[cg.ids[j]], `streamed chat token ${j}`));
  console.log(`logprobs: ${compared} values (echo, generation, chat, streamed chat) vs log_softmax of strata logits: max |d| ${maxDiff.toExponential(2)}`);

  // 2. n = 4 against its n = 1 twins (seed + i)
  let twins = 0;
  const base = { model, prompt: "the old road", max_tokens: 24, temperature: 0.9, top_p: 0.95, seed: 11 };
  const four = await client.completions.create({ ...base, n: 4 });
  const chatBase = { model, messages, max_tokens: 24, temperature: 0.9, seed: 5 };
  const chat4 = await client.chat.completions.create({ ...chatBase, n: 4 });
  const streamed4 = ["", "", "", ""];
  for await (const ch of await client.completions.create({ ...base, n: 4, stream: true }))
    for (const c of ch.choices) streamed4[c.index] += c.text;
  for (let i = 0; i < 4; ++i) {
    const one = await client.completions.create({ ...base, seed: base.seed + i });
    const c1 = await client.chat.completions.create({ ...chatBase, seed: chatBase.seed + i });
    const byIndex = four.choices.find((c) => c.index === i);
    if (!byIndex || byIndex.text !== one.choices[0].text) fail(`n=4 choice ${i} differs from its n=1 twin (seed ${base.seed + i})`); else ++twins;
    if (streamed4[i] !== one.choices[0].text) fail(`streamed n=4 choice ${i} differs from its n=1 twin`); else ++twins;
    const cb = chat4.choices.find((c) => c.index === i);
    if (!cb || cb.message.content !== c1.choices[0].message.content) fail(`chat n=4 choice ${i} differs from its n=1 twin`); else ++twins;
    if (i === 0 && four.usage.prompt_tokens !== one.usage.prompt_tokens) fail(`n=4 counts ${four.usage.prompt_tokens} prompt tokens, n=1 ${one.usage.prompt_tokens}`);
  }
  const distinct = new Set(four.choices.map((c) => c.text)).size;
  if (distinct < 2) fail("n=4 gave the same text four times at temperature 0.9");
  console.log(`n=4: ${twins} / 12 choices equal their n=1 twins (completions, streamed, chat); ${distinct} distinct texts`);

  // 3. structured output over 30 schemas
  const schemas = jsonSchemas();
  const runs = Array.from({ length: RUNS }, (_, i) => ({ k: i % schemas.length, seed: 1000 + i }));
  let stopped = 0, valid = 0;
  const bad = [], unstopped = [];
  await pool(runs, 16, async ({ k, seed }) => {
    let r;
    try {
      r = await client.chat.completions.create({
        model, max_tokens: 256, temperature: 0.8, seed,
        messages: [{ role: "user", content: "Answer in JSON." }],
        response_format: { type: "json_schema", json_schema: { name: `s${k}`, schema: schemas[k] } },
      });
    } catch (e) {
      bad.push(`schema ${k} ${JSON.stringify(schemas[k])}: ${e.message}`);
      return;
    }
    if (r.choices[0].finish_reason !== "stop") { unstopped.push(k); return; }
    ++stopped;
    let v;
    try { v = JSON.parse(r.choices[0].message.content); } catch { bad.push(`schema ${k}: not JSON: ${r.choices[0].message.content}`); return; }
    if (validates(v, schemas[k], schemas[k])) ++valid; else bad.push(`does not validate: schema ${k} ${JSON.stringify(schemas[k])}: ${r.choices[0].message.content}`);
  });
  for (const b of [...new Set(bad)].slice(0, 8)) fail(b);
  if (stopped < Math.ceil(0.95 * RUNS)) fail(`only ${stopped} of ${RUNS} seeded runs stopped within 256 tokens (want >= 95%)`);
  console.log(`structured output: ${schemas.length} schemas, ${RUNS} seeded runs: ${stopped} stopped within 256 tokens, ${valid} of them validate` +
    (unstopped.length ? ` (not stopped: schemas ${unstopped.sort((a, b) => a - b).join(", ")})` : ""));
} finally {
  await stop(server);
}

// ---- 4. tool calls in each syntax ----
const weather = { type: "function", function: { name: "get_weather", description: "Weather for a city.",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
    required: ["city"], additionalProperties: false } } };
const clock = { type: "function", function: { name: "now", description: "The time in a zone.",
  parameters: { type: "object", properties: { zone: { type: "string", enum: ["UTC", "CET", "PST"] } }, required: ["zone"], additionalProperties: false } } };
const tools = [weather, clock];
let formatsOk = 0;
const maxParallel = {};
for (const fmt of ["chatml", "llama3", "mistral-v7", "deepseek4", "gpt-oss"]) {
  const s = await startServer(["--chat-template", fmt, "-np", "4", "-c", "2048"]);
  const c = clientOf(s);
  let ok = true;
  const bad = (m) => { ok = false; fail(`${fmt}: ${m}`); };
  try {
    const messages = [{ role: "user", content: "What is the weather in Oslo, and the time in CET?" }];
    for (const [choice, name] of [[{ type: "function", function: { name: "get_weather" } }, "get_weather"], ["required", null]]) {
      const req = { model, messages, tools, tool_choice: choice, parallel_tool_calls: false, max_tokens: 200, temperature: 0.7, seed: 3 };
      const r = await c.chat.completions.create(req);
      const msg = r.choices[0].message;
      if (r.choices[0].finish_reason !== "tool_calls" || !msg.tool_calls?.length) { bad(`${JSON.stringify(choice)}: no tool call: ${JSON.stringify(r.choices[0])}`); continue; }
      for (const tc of msg.tool_calls) {
        if (name && tc.function.name !== name) bad(`named ${name}, called ${tc.function.name}`);
        const tool = tools.find((t) => t.function.name === tc.function.name);
        if (!tool) { bad(`called an unknown tool ${tc.function.name}`); continue; }
        let args;
        try { args = JSON.parse(tc.function.arguments); } catch { bad(`arguments are not JSON: ${tc.function.arguments}`); continue; }
        if (!validates(args, tool.function.parameters, tool.function.parameters)) bad(`arguments ${tc.function.arguments} do not fit ${tc.function.name}'s parameters`);
        if (!tc.id || tc.type !== "function") bad(`call without id / type: ${JSON.stringify(tc)}`);
      }
      // streamed: the deltas rebuild the same calls
      const acc = [];
      let finish = null;
      for await (const ch of await c.chat.completions.create({ ...req, stream: true })) {
        const ch0 = ch.choices[0];
        if (!ch0) continue;
        if (ch0.finish_reason) finish = ch0.finish_reason;
        for (const d of ch0.delta?.tool_calls ?? []) {
          acc[d.index] ??= { id: "", name: "", arguments: "" };
          if (d.id) acc[d.index].id = d.id;
          if (d.function?.name) acc[d.index].name += d.function.name;
          if (d.function?.arguments) acc[d.index].arguments += d.function.arguments;
        }
      }
      const flat = msg.tool_calls.map((t) => [t.function.name, t.function.arguments]);
      if (finish !== "tool_calls" || JSON.stringify(acc.map((t) => [t.name, t.arguments])) !== JSON.stringify(flat))
        bad(`streamed calls ${JSON.stringify(acc)} (finish ${finish}) differ from ${JSON.stringify(flat)}`);
      // the round trip: the calls and their results sent back
      const back = [...messages, { role: "assistant", content: msg.content ?? "", tool_calls: msg.tool_calls },
        ...msg.tool_calls.map((t) => ({ role: "tool", tool_call_id: t.id, content: t.function.name === "now" ? "09:00" : "cold, -2 C" }))];
      const after = await c.chat.completions.create({ model, messages: back, tools, max_tokens: 16, temperature: 0 });
      if (!after.choices?.[0]?.message) bad("no answer after the tool results");
    }
    // parallel calls allowed: every call the reply completes parses (a trained model may stop after one)
    for (let seed = 0; seed < 4; ++seed) {
      const r = await c.chat.completions.create({ model, messages, tools, tool_choice: "required", max_tokens: 256, temperature: 0.9, seed });
      const calls = r.choices[0].message.tool_calls ?? [];
      if (r.choices[0].finish_reason === "tool_calls" && calls.length === 0) bad("finish_reason tool_calls without calls");
      if (r.choices[0].finish_reason === "tool_calls") maxParallel[fmt] = Math.max(maxParallel[fmt] ?? 0, calls.length);
    }
  } catch (e) {
    bad(String(e));
  } finally {
    await stop(s);
  }
  if (ok) ++formatsOk;
}
console.log(`tool calls: ${formatsOk} / 5 syntaxes (named and required, streamed and not, round trip); most calls in one reply ` +
  `with parallel calls allowed: ${JSON.stringify(maxParallel)}`);
console.log(`done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed);

// ---- JSON Schema: the 30 schemas and a validator for the keywords strata supports ----
function jsonSchemas() {
  const str = (o = {}) => ({ type: "string", ...o });
  const obj = (properties, required = Object.keys(properties), extra = {}) => ({ type: "object", properties, required, additionalProperties: false, ...extra });
  return [
    obj({ name: str({ maxLength: 8 }), age: { type: "integer" } }),
    { type: "array", items: { enum: ["red", "green", 3] }, minItems: 1, maxItems: 4 },
    { anyOf: [{ type: "boolean" }, str({ minLength: 1, maxLength: 5 }), { type: "null" }] },
    { $defs: { pt: obj({ x: { type: "number" }, y: { type: "number" } }) }, type: "object",
      properties: { a: { $ref: "#/$defs/pt" }, tags: { type: "array", items: str({ maxLength: 4 }), maxItems: 2 } }, required: ["a"], additionalProperties: false },
    obj({ n: { type: "integer", minimum: -5, maximum: 42 }, x: { type: "number", exclusiveMinimum: 0, maximum: 3 } }),
    obj({ code: str({ pattern: "^[A-Z]{2}-[0-9]{2,3}$" }), day: str({ format: "date" }) }),
    { type: "array", prefixItems: [str({ format: "ipv4" }), str({ format: "uuid" }), str({ format: "time" })], items: false, minItems: 3 },
    { type: "array", prefixItems: [{ format: "date-time" }, { format: "email" }, { pattern: "^(ab|c)+\\d?$" }], items: false, minItems: 3 },
    { type: "boolean" },
    { type: "null" },
    { type: "integer", minimum: 0, maximum: 1000 },
    { type: "number", minimum: -1, maximum: 1 },
    str({ minLength: 2, maxLength: 10 }),
    { enum: ["yes", "no", "maybe"] },
    { const: "fixed" },
    obj({ ok: { const: true }, why: str({ maxLength: 20 }) }),
    { oneOf: [obj({ kind: { const: "a" }, v: { type: "integer" } }), obj({ kind: { const: "b" }, w: str({ maxLength: 6 }) })] },
    { allOf: [obj({ id: { type: "integer", minimum: 1 } })] },
    { type: "array", items: { type: "integer", minimum: 0, maximum: 9 }, minItems: 2, maxItems: 5 },
    { type: "array", items: obj({ k: str({ maxLength: 3 }), v: { type: "boolean" } }), maxItems: 3 },
    obj({ user: obj({ first: str({ maxLength: 6 }), last: str({ maxLength: 6 }) }), roles: { type: "array", items: { enum: ["admin", "dev"] }, maxItems: 2 } }),
    obj({ opt: str({ maxLength: 4 }), req: { type: "integer" } }, ["req"]),
    { type: "object", properties: { a: { type: "integer" }, b: str({ maxLength: 5 }), c: { type: "boolean" } }, required: ["a"], minProperties: 2, maxProperties: 2 },
    { type: "object", properties: { p: { type: "number" }, q: { type: "null" } }, additionalProperties: true },
    str({ format: "date" }),
    str({ format: "uuid" }),
    str({ pattern: "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$" }),
    { $defs: { node: { type: "object", properties: { v: { type: "integer" }, next: { anyOf: [{ type: "null" }, { $ref: "#/$defs/leaf" }] } }, required: ["v", "next"], additionalProperties: false },
      leaf: obj({ v: { type: "integer" } }) }, $ref: "#/$defs/node" },
    { type: ["string", "integer"], maxLength: 6 },
    obj({ t: str({ format: "time" }), when: str({ format: "date-time" }), ip: str({ format: "ipv4" }) }),
  ];
}

function resolve(s, root) {
  while (s && s.$ref) s = s.$ref.replace(/^#\//, "").split("/").reduce((o, k) => o[k], root);
  return s;
}
function typeOf(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}
function formatRe(name) {
  return {
  date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/,
  time: /^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/i,
  "date-time": /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/i,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  email: /^[^\s@]+@[^\s@]+$/,
  ipv4: /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/,
  }[name];
}
function validates(v, schema, root) {
  const s = resolve(schema, root);
  if (s === true || s === undefined) return true;
  if (s === false) return false;
  const t = typeOf(v);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((ty) => ty === t || (ty === "number" && t === "integer"))) return false;
  }
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) return false;
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(v)) return false;
  if (s.anyOf && !s.anyOf.some((x) => validates(v, x, root))) return false;
  if (s.oneOf && s.oneOf.filter((x) => validates(v, x, root)).length !== 1) return false;
  if (s.allOf && !s.allOf.every((x) => validates(v, x, root))) return false;
  if (t === "string") {
    const n = [...v].length;
    if (n < (s.minLength ?? 0) || n > (s.maxLength ?? Infinity)) return false;
    if (s.pattern && !new RegExp(s.pattern, "u").test(v)) return false;
    if (s.format && formatRe(s.format) && !formatRe(s.format).test(v)) return false;
  }
  if (t === "integer" || t === "number") {
    if (s.minimum !== undefined && v < s.minimum) return false;
    if (s.maximum !== undefined && v > s.maximum) return false;
    if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return false;
    if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) return false;
  }
  if (t === "array") {
    if (v.length < (s.minItems ?? 0) || v.length > (s.maxItems ?? Infinity)) return false;
    const pre = s.prefixItems ?? [];
    for (let i = 0; i < v.length; ++i) if (!validates(v[i], i < pre.length ? pre[i] : s.items, root)) return false;
  }
  if (t === "object") {
    const keys = Object.keys(v);
    if (keys.length < (s.minProperties ?? 0) || keys.length > (s.maxProperties ?? Infinity)) return false;
    for (const r of s.required ?? []) if (!(r in v)) return false;
    for (const k of keys) {
      const ps = s.properties?.[k];
      if (ps !== undefined) { if (!validates(v[k], ps, root)) return false; } else if (!validates(v[k], s.additionalProperties, root)) return false;
    }
  }
  return true;
}
