"""Reference renderer for Qwen3's chat template with Python's Jinja2, set up
exactly as transformers' apply_chat_template sets it up
(transformers/utils/chat_template_utils.py: ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, its own tojson
filter = json.dumps(ensure_ascii=False), raise_exception and strftime_now).

    python3 template_oracle.py TOKENIZER_CONFIG_JSON CASES_JSON

CASES_JSON is the same input as `node oracle.mjs template`; prints a JSON
array of {"text": ...} or {"error": ...}. Needs only the jinja2 package.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def compile_template(source):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def main():
    cfg_path, cases_path = sys.argv[1], sys.argv[2]
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    tpl = compile_template(cfg["chat_template"])
    out = []
    for c in cases:
        kwargs = {}
        if c.get("enable_thinking") is not None:
            kwargs["enable_thinking"] = c["enable_thinking"]
        try:
            text = tpl.render(
                messages=c["messages"],
                tools=c.get("tools"),
                documents=None,
                add_generation_prompt=bool(c.get("add_generation_prompt")),
                bos_token=cfg.get("bos_token") or "",
                eos_token=cfg.get("eos_token") or "",
                pad_token=cfg.get("pad_token") or "",
                **kwargs,
            )
            out.append({"text": text})
        except Exception as e:  # reported per case, like the node oracle
            out.append({"error": f"{type(e).__name__}: {e}"})
    sys.stdout.write(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
