// Reference oracle for tau2rl's Go tokenizer and chat template.
//
//   node oracle.mjs tokenize TOKENIZER_JSON CASES_JSON
//     CASES_JSON: a JSON array of strings. Prints a JSON array of
//     {"ids": [...], "decoded": "...", "decoded_skip": "..."}: Hugging Face's
//     Rust tokenizer (npm tokenizers, napi) with add_special_tokens=false, and
//     its decode with skip_special_tokens false/true.
//
//   node oracle.mjs template TOKENIZER_CONFIG_JSON CASES_JSON
//     CASES_JSON: a JSON array of {"messages", "tools"?, "add_generation_prompt"?,
//     "enable_thinking"?}. Prints a JSON array of {"text": "..."} or
//     {"error": "..."}: the chat_template of tokenizer_config.json rendered by
//     @huggingface/jinja (what transformers.js uses) with the variables
//     transformers' apply_chat_template passes.
//
// Install: npm ci (in this directory). Both packages ship prebuilt code and
// need no network access after install.
import { readFileSync } from "node:fs";

const [, , mode, resource, casesPath] = process.argv;
if (!mode || !resource || !casesPath) {
  process.stderr.write("usage: node oracle.mjs tokenize|template RESOURCE CASES_JSON\n");
  process.exit(2);
}
const cases = JSON.parse(readFileSync(casesPath, "utf8"));

async function tokenize() {
  const { Tokenizer } = await import("tokenizers");
  const tok = Tokenizer.fromFile(resource);
  const out = [];
  for (const s of cases) {
    const enc = await tok.encode(s, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    out.push({
      ids,
      decoded: await tok.decode(ids, false),
      decoded_skip: await tok.decode(ids, true),
    });
  }
  return out;
}

async function template() {
  const { Template } = await import("@huggingface/jinja");
  const cfg = JSON.parse(readFileSync(resource, "utf8"));
  const tpl = new Template(cfg.chat_template);
  const out = [];
  for (const c of cases) {
    const vars = {
      messages: c.messages,
      add_generation_prompt: !!c.add_generation_prompt,
      bos_token: cfg.bos_token ?? "",
      eos_token: cfg.eos_token ?? "",
      pad_token: cfg.pad_token ?? "",
    };
    if (c.tools !== undefined && c.tools !== null) vars.tools = c.tools;
    if (c.enable_thinking !== undefined && c.enable_thinking !== null) vars.enable_thinking = c.enable_thinking;
    try {
      out.push({ text: tpl.render(vars) });
    } catch (e) {
      out.push({ error: String(e && e.message ? e.message : e) });
    }
  }
  return out;
}

const result = mode === "tokenize" ? await tokenize() : mode === "template" ? await template() : null;
if (result === null) {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(result));
