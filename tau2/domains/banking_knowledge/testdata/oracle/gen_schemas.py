"""Writes ../../tools.json: the OpenAI schemas of banking_knowledge's
non-discoverable tools (agent, user, retrieval mixins), as τ²'s as_tool
builds them — docstring_parser's Google-style parse (short description = the
first line, long description = the rest before the first section; argument
descriptions from "Args:") and pydantic 2's model_json_schema of the
signature (keys sorted, "title" from the name, default values, Literal as
enum). pydantic and docstring_parser are not available here, so this is an
emulation of the few shapes these signatures use (str, int, float, bool,
Literal[str...], defaults); each shape was checked against the schemas in
../shared/tau2-data/derived/tool_schemas.json of the other domains.

Run inside the setup.sh workdir: PYTHONPATH=$W python3 gen_schemas.py OUT.json
(needs retrieval_mixins.py too: setup.sh copies it)."""
import inspect
import json
import re
import sys
import textwrap
import typing

from tau2.domains.banking_knowledge import tools as T
from tau2.domains.banking_knowledge import retrieval_mixins as M
from tau2.environment.toolkit import DISCOVERABLE_ATTR, TOOL_TYPE_ATTR

TITLES = ("Args", "Arguments", "Parameters", "Params", "Returns", "Return", "Yields", "Raises", "Examples", "Example", "Attributes")


def parse_doc(doc):
    text = inspect.cleandoc(doc or "")
    m = re.search(r"^(" + "|".join(TITLES) + r"):[ \t]*$", text, re.M)
    desc, meta = (text[: m.start()], text[m.start():]) if m else (text, "")
    parts = desc.split("\n", 1)
    short = parts[0] or None
    long = (parts[1].strip() or None) if len(parts) > 1 else None
    params = {}
    # sections: title line, then an indented block
    for sm in re.finditer(r"^(\w+):[ \t]*\n((?:[ \t]+.*\n?|\n)*)", meta, re.M):
        if sm.group(1) not in ("Args", "Arguments", "Parameters", "Params"):
            continue
        block = textwrap.dedent(sm.group(2)).strip("\n")
        items = re.split(r"\n(?=\S)", block)
        for it in items:
            if ":" not in it:
                continue
            before, d = it.split(":", 1)
            d = d[1:] if d.startswith(" ") else d
            if "\n" in d:
                first, rest = d.split("\n", 1)
                d = first + "\n" + inspect.cleandoc(rest)
            d = d.strip("\n")
            name = before.split("(")[0].strip()
            params[name] = d
    return short, long, params


def prop_schema(name, anno, default, desc):
    s = {}
    origin = typing.get_origin(anno)
    if origin is typing.Literal:
        vals = list(typing.get_args(anno))
        s["enum"] = vals
        s["type"] = "string"
    else:
        s["type"] = {str: "string", int: "integer", float: "number", bool: "boolean"}[anno]
    if default is not inspect.Parameter.empty:
        s["default"] = default
    if desc is not None:
        s["description"] = desc
    s["title"] = name.replace("_", " ").title()
    return dict(sorted(s.items()))


def schema(f):
    short, long, pdesc = parse_doc(f.__doc__)
    sig = inspect.signature(f)
    hints = typing.get_type_hints(f)
    props, req = {}, []
    for n, p in sig.parameters.items():
        if n == "self":
            continue
        props[n] = prop_schema(n, hints[n], p.default, pdesc.get(n))
        if p.default is inspect.Parameter.empty:
            req.append(n)
    params = {"properties": props}
    if req:
        params["required"] = req
    params["title"] = "parameters"
    params["type"] = "object"
    desc = short if not long else short + "\n\n" + long
    return {"type": "function", "function": {"name": f.__name__, "description": desc, "parameters": params}}


def tools_of(cls):
    out = []
    for name, f in cls.__dict__.items():
        if hasattr(f, TOOL_TYPE_ATTR) and not getattr(f, DISCOVERABLE_ATTR, False):
            out.append(schema(f))
    return out


res = {}
for cls in (T.KnowledgeTools, T.KnowledgeUserTools, M.KBSearchMixin, M.GrepMixin, M.KBSearchBm25AllToolsMixin, M.KBSearchDenseAllToolsMixin, M.ShellMixin, M.RewriteContextMixin):
    for s in tools_of(cls):
        res[s["function"]["name"]] = s
json.dump(list(res.values()), open(sys.argv[1], "w"), indent=1, ensure_ascii=False)
open(sys.argv[1], "a").write("\n")
