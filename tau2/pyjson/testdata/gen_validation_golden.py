"""Regenerate golden/validation_errors.jsonl with real pydantic (2.13 here;
τ² locks 2.12, whose pydantic-core formats input_value= the same way).

    python3 gen_validation_golden.py

Each line is {"model": ..., "in": JSON text, "error": str(ValidationError),
"pydantic": "2.13"}: the input is parsed with json.loads (as τ² parses tool
call arguments) and validated with Model.model_validate in lax mode. The Go
test (validation_golden_test.go) mirrors these models field for field and
swaps the version in the errors.pydantic.dev URL for pyjson.PydanticVersion.

The inputs exercise pydantic-core's truncation of long reprs
(write_truncated_to_limited_bytes(repr, 50): byte lengths around the limit,
multi-byte characters straddling either cut) and Python's repr of strings
(quotes, escapes, non-printable and lone-surrogate characters).
"""
import json
from typing import List, Optional

import pydantic
from pydantic import BaseModel, ValidationError


class Payment(BaseModel):
    payment_id: str
    amount: int


class Order(BaseModel):
    order_id: str
    item_ids: List[str]
    quantities: List[int]
    total: float
    payment: Payment
    note: Optional[str] = None


class Count(BaseModel):
    n: int


class Name(BaseModel):
    s: str


class Flag(BaseModel):
    on: bool


MODELS = {m.__name__: m for m in (Payment, Order, Count, Name, Flag)}


def jstr(s):
    return json.dumps(s)


def n(v):
    return '{"n": %s}' % v


def s(v):
    return '{"s": %s}' % v


cases = []
# Byte lengths of the repr around 50: 'a'*k has a repr of k+2 bytes.
for k in (46, 47, 48, 49, 50, 51, 52, 53, 100):
    cases.append(("Count", n(jstr("a" * k))))
    cases.append(("Name", s("[%s]" % jstr("b" * k))))
# Increasing digit strings show exactly which bytes are kept.
digits = "".join(str(i % 10) for i in range(80))
for k in (48, 49, 50, 60, 80):
    cases.append(("Name", s(jstr(digits[:k]).join("[]"))))
# Multi-byte characters at every offset of both cuts (2-, 3- and 4-byte UTF-8).
for ch in ("é", "€", "😀", "中"):
    for pad in range(4):
        cases.append(("Count", n(jstr("x" * pad + ch * 30))))
        cases.append(("Count", n(jstr(ch * 20 + "y" * pad + ch * 20))))
# Quotes, escapes, controls and non-printables in long and short reprs.
for text in ("it's a long value that keeps going on and on and on",
             'both \' and " quotes in a rather long string value here',
             'only "double" quotes in a rather long string value here',
             "tabs\tand\nnewlines\rand\\backslashes in a long string value",
             "\x00\x01\x1f\x7f controls \x80\x85\x9f then text to pass the limit",
             "nbsp\u00a0soft\u00adhyphen zwsp\u200b line\u2028para\u2029 ideo\u3000 bom\ufeff",
             "private\ue000 plane\U000f0000 tag\U000e0001 unassigned\U0003ffff more text",
             "short\u00a0\u200b", "caf\u00e9 \u2603 \U0001f600"):
    cases.append(("Count", n(jstr(text))))
# Lone surrogates (json.loads keeps them; repr escapes them).
cases += [("Count", n('"\\ud800 lone high and a long tail of text to truncate it"')),
          ("Count", n('"long text before the lone low surrogate at the end\\udc00"')),
          ("Count", n('"\\ud83d\\ude00 pair then \\udfff lone"'))]
# Containers: lists and dicts whose repr is cut in the middle.
cases += [
    ("Count", n('[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]')),
    ("Count", n('{"flight_number": "HAT170", "date": "2024-05-01", "cabin": "economy"}')),
    ("Count", n('[1.5, 1e+300, -0.0, true, false, null, 123456789012345678901234567890]')),
    ("Name", s('{"nested": {"deeper": ["with a long string inside it all", 1]}}')),
    ("Count", n('["credit_card_1234567", "gift_card_7654321", "paypal_1111111"]')),
    ("Count", n('{"user_id": "mia_li_3668", "payment_id": "credit_card_4421486", "amount": 2.5}')),
    ("Count", n('[0.1, 1e16, 1e-05, -0.0, 1.7976931348623157e308, 2.5, 3.0, 4.25]')),
    ("Count", n('[12345678901234567890123456789, -9223372036854775808, 1000000000000000000000000000000]')),
    ("Count", n('[null, true, false, {"k": [1, "%s"]}]' % ("x" * 40))),
]
# Whole models: "Field required" shows the whole (truncated) argument dict;
# several errors in one model; a nested model given a long list.
cases += [
    ("Order", '{"order_id": "#W1234567", "item_ids": ["1008292230", "1008292231"], "quantities": [1, 2], "total": 98.5}'),
    ("Order", '{"order_id": ["#W1234567", "#W7654321", "#W0000000"], "item_ids": "1008292230, 1008292231, 1008292232",'
              ' "quantities": [1, "two", 3.5, "a very long quantity string that is not a number"],'
              ' "total": "ninety-eight dollars and fifty cents", "payment": {"payment_id": "credit_card_1234567"}}'),
    ("Order", '{"order_id": "#W1", "item_ids": [], "quantities": [], "total": 1,'
              ' "payment": ["credit_card_1234567", "gift_card_7654321", "paypal_1111111"], "note": 12345}'),
    ("Payment", '{"payment_id": "credit_card_1234567", "amount": "one hundred and twenty three dollars"}'),
    ("Payment", '["credit_card_1234567", "gift_card_7654321", "paypal_1111111", "certificate_1"]'),
    ("Payment", '"a single string that is much longer than fifty bytes in its repr"'),
]

# Lax bools: strings pydantic-core cannot interpret (compared unstripped), ints other than 0/1
# (bool_parsing), fractions, huge ints, infinities and containers (bool_type), lone surrogates.
cases += [("Flag", '{"on": %s}' % v) for v in (
    '" true"', '"true "', '"maybe"', '""', '"yes please"', '2', '-1', '0.5', 'null', '[]', '{}',
    '12345678901234567890123456789', '1e400', '"\\ud800"', '["true", "false"]')]

version = ".".join(pydantic.VERSION.split(".")[:2])
with open("golden/validation_errors.jsonl", "w") as out:
    for model, text in cases:
        try:
            MODELS[model].model_validate(json.loads(text))
        except ValidationError as e:
            out.write(json.dumps({"model": model, "in": text, "error": str(e), "pydantic": version}) + "\n")
            continue
        raise SystemExit(f"expected a validation error for {model} {text}")
