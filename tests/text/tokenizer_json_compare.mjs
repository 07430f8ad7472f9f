// Compares strata's tokenizer.json encoder with the Hugging Face reference (@huggingface/tokenizers,
// pure JS) on generated mixed text: English, code, CJK, emoji, numbers, whitespace runs, other
// scripts and added / special tokens inside the text.
// Usage: node tokenizer_json_compare.mjs STRATA TOKENIZERS_MJS TOKENIZER_JSON [N_LINES] [WORK_DIR] [nfc]
// With "nfc" a copy of the file with an NFC normalizer (as Qwen's have) is compared instead.
// Prints the agreement count; exits 1 on any disagreement (showing the first few).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [strata, tokenizersMjs, tokJsonArg, nArg, workArg, variant] = process.argv.slice(2);
if (!strata || !tokenizersMjs || !tokJsonArg) {
  console.error("usage: node tokenizer_json_compare.mjs STRATA TOKENIZERS_MJS TOKENIZER_JSON [N_LINES] [WORK_DIR]");
  process.exit(2);
}
const nLines = Number(nArg ?? 12000);
const work = workArg ?? path.dirname(tokJsonArg);
const { Tokenizer } = await import(pathToFileURL(tokenizersMjs).href);

const tokJson = JSON.parse(fs.readFileSync(tokJsonArg, "utf8"));
let tokJsonPath = tokJsonArg;
if (variant === "nfc") {
  tokJson.normalizer = { type: "NFC" };
  fs.mkdirSync(path.join(work, "nfc"), { recursive: true });
  tokJsonPath = path.join(work, "nfc", "tokenizer.json");
  fs.writeFileSync(tokJsonPath, JSON.stringify(tokJson));
}
const cfgPath = path.join(path.dirname(tokJsonPath), "tokenizer_config.json");
const tokCfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
const tok = new Tokenizer(tokJson, tokCfg);

// Deterministic generator (mulberry32).
let seed = 20261202;
const rnd = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const cp = (lo, hi) => String.fromCodePoint(int(lo, hi));
const run = (f, lo, hi) => Array.from({ length: int(lo, hi) }, f).join("");

const words = ("the of and to in is was that for it with as his on be at by this had not are but from or have " +
  "an they which one you were her all she there would their we him been has when who will more no if out so said " +
  "what up its about into than them can only other new some could time these two may then do first any my now " +
  "such like our over man me even most made after also did many before must through back years where much your " +
  "way well down should because each just those people Mr how too little state good very make world still own see " +
  "men work long get here between both life being under never day same another know while last might us great old " +
  "year off come since against go came right used take three tokenizer DeepSeek Hugging Face strata JSON HTTP").split(" ");
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D"];
const punct = [".", ",", "!", "?", ";", ":", "...", "—", "–", "(", ")", "[", "]", "{", "}", "\"", "'", "`", "-", "/",
  "\\", "@", "#", "$", "%", "^", "&", "*", "+", "=", "<", ">", "|", "~", "_", "«", "»", "“", "”", "‘", "’", "¿", "¡"];
const spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\t\t", "\u00a0", "\u2003", "\u3000",
  "\u0085", "\u2028", "\u200b", "\ufeff", "\u202f", "        ", "\n   \n", " \t \n"];
const code = [
  "def f(x):\n    return x ** 2 + 1", "for (int i = 0; i < n; ++i) { sum += a[i]; }", "if __name__ == '__main__':",
  "const x = await fetch(`https://example.com/api?q=${q}&n=10`);", "#include <vector>\nint main() { return 0; }",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;", "{\"key\": [1, 2.5, null, true], \"s\": \"v\\n\"}",
  "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }", "x=>x*2", "a&&b||!c", "i+=1;j-=2;k*=3", "//comment\n/* block */",
  "<div class=\"row\"><span>hi</span></div>", "$ ls -la /usr/local/bin | grep -v '^d'", "git commit -m \"fix: bug\"",
  "λx.λy.x", "0x7fff_ffff", "1e-9", "np.array([[1,2],[3,4]]).T @ w", "    indented\n\tTabbed\n  mixed",
];
const scripts = [
  [0x4e00, 0x9fa5], [0x3040, 0x309f], [0x30a0, 0x30ff], [0xac00, 0xd7a3], [0x0400, 0x04ff], [0x0370, 0x03ff],
  [0x0600, 0x06ff], [0x05d0, 0x05ea], [0x0900, 0x097f], [0x0e00, 0x0e7f], [0x1780, 0x17ff], [0x00c0, 0x024f],
  [0x1e00, 0x1eff], [0xff01, 0xff5e], [0x3000, 0x303f], [0x2000, 0x206f], [0x2190, 0x22ff], [0x3400, 0x4dbf],
  [0x20000, 0x2a6df], [0x0300, 0x036f], [0x2460, 0x24ff], [0x10a0, 0x10ff], [0x0530, 0x058f], [0x1100, 0x11ff],
];
const emoji = () => {
  switch (int(0, 5)) {
    case 0: return cp(0x1f600, 0x1f64f);
    case 1: return cp(0x1f300, 0x1f5ff) + "\ufe0f";
    case 2: return cp(0x1f466, 0x1f469) + "\u200d" + cp(0x1f466, 0x1f469) + "\u200d" + cp(0x1f466, 0x1f469);
    case 3: return cp(0x1f44a, 0x1f450) + cp(0x1f3fb, 0x1f3ff);
    case 4: return cp(0x1f1e6, 0x1f1ff) + cp(0x1f1e6, 0x1f1ff);
    default: return cp(0x2600, 0x27bf);
  }
};
const numbers = () => {
  switch (int(0, 7)) {
    case 0: return String(int(0, 9));
    case 1: return String(int(0, 1e9));
    case 2: return (rnd() * 1e4).toFixed(int(1, 6));
    case 3: return int(1, 999) + "," + String(int(0, 999)).padStart(3, "0") + "," + String(int(0, 999)).padStart(3, "0");
    case 4: return "-" + (rnd() * 10).toExponential(3);
    case 5: return run(() => cp(0x0660, 0x0669), 1, 8);  // Arabic-Indic digits
    case 6: return pick(["²", "³", "½", "Ⅻ", "①", "٣", "४", "〇", "十二", "1st", "2nd", "3rd", "4th"]);
    default: return run(() => String(int(0, 9)), 4, 30);
  }
};
const added = tokJson.added_tokens.map((t) => t.content);
const special = () => {
  switch (int(0, 4)) {
    case 0: return pick(added);
    case 1: return pick(added.slice(0, 40));
    case 2: return pick(added).slice(0, -1);  // broken: not a token
    case 3: return pick(["<|im_start|>", "<|endoftext|>", "<s>", "</s>", "<think>", "</think>", "<unk>"]);
    default: return pick(added) + pick(added);
  }
};
const english = () => {
  let s = pick(words);
  if (rnd() < 0.3) s = s[0].toUpperCase() + s.slice(1);
  if (rnd() < 0.05) s = s.toUpperCase();
  if (rnd() < 0.1) s += pick(contractions);
  return s;
};
const piece = () => {
  const r = rnd();
  if (r < 0.30) return english() + (rnd() < 0.8 ? " " : pick(punct) + " ");
  if (r < 0.38) return pick(code);
  if (r < 0.52) { const [lo, hi] = pick(scripts); return run(() => cp(lo, hi), 1, 12); }
  if (r < 0.58) return emoji();
  if (r < 0.68) return numbers();
  if (r < 0.78) return pick(spaces);
  if (r < 0.86) return pick(punct);
  if (r < 0.93) return special();
  if (r < 0.97) return "e\u0301" + pick(["a\u0308", "n\u0303", "\u1ec7", "o\u031b\u0301"]);
  return cp(0x20, 0x7e);
};

const texts = [];
for (let i = 0; i < nLines; ++i) {
  let s = "";
  const n = i < 200 ? 1 : int(1, 24);
  for (let k = 0; k < n; ++k) s += piece();
  texts.push(s);
}
// One text per line for `strata tokenize --lines` (escapes: \\ \n \r).
const escaped = texts.map((s) => s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r"));
fs.mkdirSync(work, { recursive: true });
const linesFile = path.join(work, "tokenizer_json_lines.txt");
fs.writeFileSync(linesFile, escaped.join("\n") + "\n");

const t0 = Date.now();
const want = texts.map((s) => tok.encode(s, { add_special_tokens: false }).ids);
const tJs = Date.now() - t0;
const t1 = Date.now();
const out = execFileSync(strata, ["tokenize", "--tokenizer", tokJsonPath, "--lines", "-f", linesFile, "--parse-special",
  "--ids"], { maxBuffer: 1 << 30, encoding: "utf8" });
const tStrata = Date.now() - t1;
const got = out.split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
if (got.length !== texts.length) {
  console.error(`strata printed ${got.length} lines for ${texts.length} texts`);
  process.exit(1);
}

let agree = 0, nTok = 0, shown = 0;
for (let i = 0; i < texts.length; ++i) {
  nTok += want[i].length;
  if (JSON.stringify(want[i]) === JSON.stringify(got[i])) { ++agree; continue; }
  if (shown++ < 5) {
    console.error(`line ${i + 1}: ${JSON.stringify(texts[i])}\n  reference ${JSON.stringify(want[i])}\n  strata    ${JSON.stringify(got[i])}`);
  }
}
console.log(`tokenizer.json${variant ? " (" + variant + ")" : ""} agreement: ${agree} / ${texts.length} lines (${nTok} reference tokens; ` +
  `reference ${tJs} ms, strata ${tStrata} ms incl. load)`);
process.exit(agree === texts.length ? 0 : 1);
