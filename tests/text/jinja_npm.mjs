// strata's Jinja engine against @huggingface/jinja (tests/text/jinja_npm.sh): every template in
// TEMPLATE_DIR rendered for a set of conversations by both, in one `strata apply-template --jinja`
// run; wherever @huggingface/jinja renders a (template, conversation), strata must render the same
// string. Prints how many matched, the pairs @huggingface/jinja itself rejects, and any difference.
// Usage: node jinja_npm.mjs STRATA CACHE TEMPLATE_DIR
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [strata, cache, tdir] = process.argv.slice(2);
if (!strata || !cache || !tdir) {
  console.error("usage: node jinja_npm.mjs STRATA CACHE TEMPLATE_DIR");
  process.exit(2);
}
const { Template } = await import(pathToFileURL(path.join(cache, "hf-jinja", "package", "dist", "index.js")).href);
const t0 = Date.now();

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "The city name" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
};
const call = { id: "call00001", type: "function", function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } };
const conversations = {
  "system+user": { messages: [{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: "Hello!" }] },
  "user, no generation prompt": { messages: [{ role: "user", content: "Hi" }], add_generation_prompt: false },
  "multi-turn": {
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "What is 2+2?" },
      { role: "assistant", content: "4" },
      { role: "user", content: "And 3+3?" },
    ],
  },
  "multi-turn, no generation prompt": {
    messages: [
      { role: "user", content: "Name a colour." },
      { role: "assistant", content: "Blue." },
    ],
    add_generation_prompt: false,
  },
  "tools given": {
    messages: [{ role: "system", content: "You can call tools." }, { role: "user", content: "Weather in Paris?" }],
    tools: [weather],
  },
  "tool calls and results": {
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [call] },
      { role: "tool", tool_call_id: "call00001", name: "get_weather", content: "{\"temp\": 21}" },
      { role: "assistant", content: "It is 21 degrees in Paris." },
      { role: "user", content: "Thanks!" },
    ],
    tools: [weather],
  },
  "reasoning, enable_thinking": {
    messages: [
      { role: "user", content: "Think: 1+1?" },
      { role: "assistant", content: "2", reasoning_content: "One plus one is two." },
      { role: "user", content: "And 2+2?" },
    ],
    chat_template_kwargs: { enable_thinking: true },
  },
  "parallel tool calls, thinking": {
    messages: [
      { role: "system", content: "Use tools when useful." },
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant", content: "", reasoning_content: "Two cities: two calls.",
        tool_calls: [call, { id: "call00002", type: "function", function: { name: "get_weather", arguments: { city: "Rome" } } }],
      },
      { role: "tool", tool_call_id: "call00001", name: "get_weather", content: "{\"temp\": 21}" },
      { role: "tool", tool_call_id: "call00002", name: "get_weather", content: "{\"temp\": 25}" },
    ],
    tools: [weather],
    chat_template_kwargs: { enable_thinking: true },
  },
  "long history, no tools": {
    messages: [
      { role: "system", content: "  You answer in French.  " },
      { role: "user", content: "Hello" },
      { role: "assistant", content: "Bonjour !" },
      { role: "user", content: "Quotes \"x\" and <tags> & 'single' — é ü 漢字 🙂" },
      { role: "assistant", content: "D'accord.\n\nLigne deux." },
      { role: "user", content: "Encore" },
    ],
  },
  "enable_thinking false": {
    messages: [{ role: "user", content: "Quick answer: capital of France?" }],
    chat_template_kwargs: { enable_thinking: false },
  },
};

const BOS = "<s>", EOS = "</s>";
const files = fs.readdirSync(tdir).filter((f) => f.endsWith(".jinja")).sort();
if (files.length === 0) {
  console.error(`no templates in ${tdir}`);
  process.exit(1);
}
const jobs = [];
for (const f of files) {
  const source = fs.readFileSync(path.join(tdir, f), "utf8");
  let tmpl = null, parseError = null;
  try {
    tmpl = new Template(source);
  } catch (e) {
    parseError = String(e.message || e);
  }
  for (const [name, conv] of Object.entries(conversations)) {
    const gen = conv.add_generation_prompt ?? true;
    const ctx = { messages: conv.messages, add_generation_prompt: gen, bos_token: BOS, eos_token: EOS };
    if (conv.tools) ctx.tools = conv.tools;
    Object.assign(ctx, conv.chat_template_kwargs || {});
    let want = null, why = parseError;
    if (tmpl) {
      try {
        want = tmpl.render(structuredClone(ctx));
      } catch (e) {
        why = String(e.message || e);
      }
    }
    jobs.push({ file: f, conv: name, want, why, request: { ...conv, chat_template_file: path.join(tdir, f) } });
  }
}

const run = spawnSync(strata, ["apply-template", "--jinja", "--bos-token", BOS, "--eos-token", EOS], {
  input: JSON.stringify(jobs.map((j) => j.request)),
  maxBuffer: 256 << 20,
  encoding: "utf8",
});
if (run.status !== 0) {
  console.error(`strata apply-template failed (${run.status}): ${run.stderr}`);
  process.exit(1);
}
const got = JSON.parse(run.stdout);
if (got.length !== jobs.length) {
  console.error(`strata answered ${got.length} renders for ${jobs.length} requests`);
  process.exit(1);
}

function firstDiff(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  const show = (s) => JSON.stringify(s.slice(Math.max(0, i - 40), i + 60));
  return `at char ${i}: hf-jinja ${show(a)}\n      strata   ${show(b)}`;
}

let matched = 0, hfRejected = 0;
const failures = [], rejected = new Map();
jobs.forEach((j, k) => {
  const g = got[k];
  if (j.want === null) {
    ++hfRejected;
    if (!rejected.has(j.file)) rejected.set(j.file, []);
    rejected.get(j.file).push(`${j.conv}: ${j.why.split("\n")[0].slice(0, 120)}`);
    return;
  }
  if (typeof g !== "string") {
    failures.push(`${j.file} / ${j.conv}: strata failed: ${g.error}`);
  } else if (g !== j.want) {
    failures.push(`${j.file} / ${j.conv}: differs ${firstDiff(j.want, g)}`);
  } else {
    ++matched;
  }
});

const perTemplate = new Map();
jobs.forEach((j, k) => {
  if (j.want === null) return;
  const ok = typeof got[k] === "string" && got[k] === j.want;
  const e = perTemplate.get(j.file) || { ok: 0, n: 0 };
  e.n += 1;
  e.ok += ok ? 1 : 0;
  perTemplate.set(j.file, e);
});
const fullTemplates = [...perTemplate.values()].filter((e) => e.ok === e.n).length;
console.log(`${files.length} templates x ${Object.keys(conversations).length} conversations = ${jobs.length} renders; ` +
  `@huggingface/jinja rendered ${jobs.length - hfRejected}, strata matched ${matched}; ` +
  `${fullTemplates}/${perTemplate.size} templates match on every conversation hf-jinja renders (${Date.now() - t0} ms)`);
// What hf-jinja rejects (the template's raise_exception for a conversation it does not take, or a
// feature hf-jinja lacks) is not compared; listed with JINJA_NPM_VERBOSE=1, with strata's outcome.
if (process.env.JINJA_NPM_VERBOSE) {
  for (const [f, whys] of rejected) console.log(`hf-jinja rejects ${f}: ${whys.join("; ")}`);
  jobs.forEach((j, k) => {
    if (j.want !== null) return;
    const g = got[k];
    console.log(`  strata on ${j.file} / ${j.conv}: ${typeof g === "string" ? `renders ${g.length} chars` : g.error}`);
  });
}
for (const f of failures) console.log(`FAIL ${f}`);
process.exit(failures.length ? 1 : 0);
