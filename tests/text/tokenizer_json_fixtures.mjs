// The tokenizer.json files strata writes from the shared GGUF vocabs (`strata tokenize -m V.gguf
// --export-tokenizer-json`), encoded by the Hugging Face reference (@huggingface/tokenizers): every
// .inp test string must give llama.cpp's .out ids, so the written files are real HF tokenizers.
// Usage: node tokenizer_json_fixtures.mjs TOKENIZERS_MJS VOCAB_DIR WORK_DIR NAME...
// (WORK_DIR/NAME/tokenizer.json holds the written file of VOCAB_DIR/ggml-vocab-NAME.gguf.)
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [tokenizersMjs, vocabDir, work, ...names] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(tokenizersMjs).href);
let failed = 0;
for (const name of names) {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(work, name, "tokenizer.json"), "utf8")), {});
  const base = path.join(vocabDir, `ggml-vocab-${name}.gguf`);
  const texts = fs.readFileSync(base + ".inp", "utf8").split("\n__ggml_vocab_test__\n").slice(0, -1);
  const want = fs.readFileSync(base + ".out", "utf8").split("\n").slice(0, texts.length)
    .map((l) => l.trim() === "" ? [] : l.trim().split(" ").map(Number));
  let pass = 0;
  texts.forEach((s, i) => {
    const got = tok.encode(s, { add_special_tokens: false }).ids;
    if (JSON.stringify(got) === JSON.stringify(want[i])) ++pass;
    else console.error(`${name}: ${JSON.stringify(s)}\n  .out      ${want[i].join(" ")}\n  reference ${got.join(" ")}`);
  });
  console.log(`written ${name} tokenizer.json, HF reference: ${pass} / ${texts.length} .out cases`);
  if (pass !== texts.length) failed = 1;
}
process.exit(failed);
