"""Regenerate pyjson's golden files with CPython's json module (3.11).

    python3 gen_golden.py
"""
import json
import math
import random
import struct

inputs = [
    'null', 'true', 'false', '0', '-0', '12', '-12', '12.0', '1e5', '1E+5', '1e-5', '-0.0', '0.1', '1.5e300',
    '1e400', '-1e400', '123456789012345678901234567890', '-9223372036854775808', '9223372036854775808',
    'NaN', 'Infinity', '-Infinity', '"plain"', '"caf\\u00e9"', '"café ☕ 😀"', '"\\ud83d\\ude00"', '"\\ud800"',
    '"\\udc00x"', '"\\ud800\\u0041"', '"tab\\tnl\\ncr\\rbs\\\\q\\"sl\\/"', '"\\u0000\\u001f\\u007f\\u0080"',
    '"\\b\\f"', '[]', '{}', '[1, 2.5, "x", null, true]', '{"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": 2}}',
    '{"a": 1, "a": 2, "b": 3}', '{"b": 1, "a": 2, "b": 3}', ' \t\n{ "k" : [ 1 , 2 ] } \n', '[1e16, 1e15, 123456789.125, 0.0001, 0.00001]',
    '[5e-324, 1.7976931348623157e308, 2.2250738585072014e-308, 100.0, 98.5, 0.30000000000000004]',
    '{"\\u00e9": 1, "e": 2, "\\ud83d\\ude00": 3, "Z": 4, "a": 5, "\\uffff": 6}',
    '"\\u2028\\u2029"', '[[[[[]]]]]', '{"x": {"y": {"z": {}}}}',
]
errors = ['', ' ', '[', ']', '{', '{"a"}', '{"a":}', '{"a":1,}', '[1,]', '[1 2]', '01', '1.', '.5', '-', '+1', 'nul', 'tru',
          '"abc', '"a\\x"', '"\\u12"', '"\x01"', '{1: 2}', '[1] x', 'NaNa', '"\\', 'infinity', '1e', '- 1']

random.seed(7)
floats = [0.0, -0.0, 1.0, -1.5, 12.0, 0.1, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 1.5e-7, 123456.789, 2.675,
          float('inf'), float('-inf'), 5e-324, 1.7976931348623157e308, 1/3, 2/3, 100.0, 4.35, 1e22, 1e21, 1e-320]
for _ in range(300):
    bits = random.getrandbits(64)
    f = struct.unpack('<d', struct.pack('<Q', bits))[0]
    if not math.isnan(f):
        floats.append(f)
for _ in range(200):
    floats.append(round(random.uniform(-1e4, 1e4), random.randint(0, 6)))

with open('golden/loads_dumps.jsonl', 'w') as out:
    for s in inputs:
        v = json.loads(s)
        out.write(json.dumps({"in": s, "dumps": json.dumps(v), "sorted": json.dumps(v, sort_keys=True),
                              "utf8": json.dumps(v, ensure_ascii=False)}) + "\n")
with open('golden/errors.jsonl', 'w') as out:
    for s in errors:
        try:
            json.loads(s)
            raise SystemExit(f"expected an error for {s!r}")
        except json.JSONDecodeError as e:
            out.write(json.dumps({"in": s, "error": str(e)}) + "\n")
with open('golden/floats.jsonl', 'w') as out:
    for f in floats:
        out.write(json.dumps({"bits": struct.unpack('<Q', struct.pack('<d', f))[0], "repr": repr(f), "json": json.dumps(f),
                              "round2": repr(round(f, 2))}) + "\n")
