// Reference oracle for tau2rl's Go tokenizer and chat template.
//
//   node oracle.mjs tokenize TOKENIZER_JSON CASES_JSON
//     CASES_JSON: a JSON array of strings. Prints a JSON array of
//     {"ids": [...], "decoded": "...", "decoded_skip": "..."}: Hugging Face's
//     Rust tokenizer (npm tokenizers, napi) with add_special_tokens=false, and
//     its decode with skip_special_tokens false/true.
//
//   node oracle.mjs decode TOKENIZER_JSON CASES_JSON
//     CASES_JSON: a JSON array of id arrays. Prints a JSON array of
//     {"decoded": "...", "decoded_skip": "..."}.
//
//   node oracle.mjs template TOKENIZER_CONFIG_JSON CASES_JSON
//     CASES_JSON: a JSON array of {"messages", "tools"?, "add_generation_prompt"?,
//     "enable_thinking"?}. Prints a JSON array of {"text": "..."} or
//     {"error": "..."}: the chat_template of tokenizer_config.json rendered by
//     @huggingface/jinja (what transformers.js uses) with the variables
//     transformers' apply_chat_template passes, and with str.strip(chars)
//     fixed to Python's semantics (see pythonStrip). template_oracle.py does
//     the same with Python's Jinja2 exactly as transformers configures it.
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

async function decode() {
  const { Tokenizer } = await import("tokenizers");
  const tok = Tokenizer.fromFile(resource);
  const out = [];
  for (const ids of cases) {
    out.push({ decoded: await tok.decode(ids, false), decoded_skip: await tok.decode(ids, true) });
  }
  return out;
}

// pythonStrip patches @huggingface/jinja's str.strip/lstrip/rstrip, which
// ignore their `chars` argument (0.5.11 trims whitespace whatever is passed),
// to Python's semantics. Qwen3's template calls strip('\n'), lstrip('\n') and
// rstrip('\n'): unpatched, content with leading or trailing spaces around
// thinking renders differently from transformers (Python Jinja2).
function pythonStrip(Environment) {
  const probe = new Environment();
  probe.set("s", "x");
  const StringValue = probe.lookupVariable("s").constructor;
  const desc = Object.getOwnPropertyDescriptor(StringValue.prototype, "builtins");
  if (!desc || !desc.get) throw new Error("@huggingface/jinja internals changed: StringValue.builtins getter not found");
  // Python's str.isspace() characters (str.strip() with no argument).
  const pyWhitespace = "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
  const strip = (s, chars, left, right) => {
    const set = new Set(chars);
    const cps = Array.from(s);
    let a = 0, b = cps.length;
    if (left) while (a < b && set.has(cps[a])) a++;
    if (right) while (b > a && set.has(cps[b - 1])) b--;
    return cps.slice(a, b).join("");
  };
  Object.defineProperty(StringValue.prototype, "builtins", {
    configurable: true,
    get() {
      const m = desc.get.call(this);
      if (m.__pythonStrip) return m;
      const FunctionValue = m.get("strip").constructor;
      const self = this;
      for (const [name, left, right] of [["strip", true, true], ["lstrip", true, false], ["rstrip", false, true]]) {
        m.set(name, new FunctionValue((args) => {
          const a = args && args.length > 0 ? args[0] : undefined;
          const chars = a === undefined || a.value === null || a.value === undefined ? pyWhitespace : String(a.value);
          return new StringValue(strip(self.value, chars, left, right));
        }));
      }
      m.__pythonStrip = true;
      return m;
    },
  });
}

async function template() {
  const { Template, Environment } = await import("@huggingface/jinja");
  pythonStrip(Environment);
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

const modes = { tokenize, decode, template };
const result = modes[mode] ? await modes[mode]() : null;
if (result === null) {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(result));
