"""Regenerate golden.jsonl: τ²'s calculate() on each expression (CPython 3.11).

    python3 gen_golden.py
"""
import json
import random


def calculate(expression):  # tau2 AirlineTools.calculate / RetailTools.calculate
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))


exprs = ["2 + 2", "(1+2)*3/7", "10/4", "2**10", "2**-1", "-2**2", "(-2)**2", "2**3**2", "7//2", "-7//2", "7//-2",
         "7.5//2", "-7.5//2", "7.5//-2", "1/0", "1.0/0", "1//0", "1.0//0", "0**0", "0**-1", "0.0**-1", "(-8)**0.5",
         "(-8)**(1/3)", "(-2)**3", "(-2.0)**3", "10**400/10**399", "10**400*1.0", "2.0**10000", "1e5", "abc", "()",
         "(())", "()+()", "-()", "1 2", "", "   ", "01", "00", "0.5", "00.5", "1.5.5", ".5+.5", "5.", "5.+1", "1..2",
         ".", "+", "1+", "(1", "1)", "((1))", "- - 1", "+-+1", "1 -- 1", "3 * -2", "2 ** - 1",
         "100000000000000000000*10", "3.0", "123456789012345678.0", "0.0001", "0.000012345", "2.675", "1.005*1",
         "0.125", "0.375", "-0.0", "-0.001", "1e16", "99999999999999999999999", "(1)(2)", "1/3", "2/3*3",
         "123.456 + 789.012", "1000 * 1.07", "(500 - 123.45) * 0.1", "4.35*100", "0.1*3", "1 / 7 * 7",
         "999999999999999999/3", "10 // 3 * 3 + 10 // 3", "2*(3+(4-(5*(6/(7+8)))))", "17.5/2.5", "0.1+0.2-0.3",
         "1.0000000000000002", "5e-324*1", "1/10**400", "-(2**3)", "((((((((((1))))))))))", " 1 + 1 ", "1 + ",
         "4 ** 0.5", "8 ** (1/3)", "(2**53+1)*1.0", "(2**53+1)/1", "9007199254740993/1", "1 / 3.0"]
random.seed(3)
ops = ["+", "-", "*", "/", "//", "**"]
for _ in range(300):
    n = random.randint(1, 4)
    e = str(round(random.uniform(-50, 50), random.choice([0, 0, 1, 2, 3])))
    for _ in range(n):
        op = random.choice(ops)
        r = round(random.uniform(0, 20), random.choice([0, 0, 1, 2]))
        if op == "**":
            r = random.randint(-3, 4)
        e = f"({e}) {op} {r}" if random.random() < 0.5 else f"{e} {op} {r}"
    exprs.append(e.replace(".0 ", " ") if random.random() < 0.5 else e)

with open("golden.jsonl", "w") as out:
    for e in exprs:
        try:
            res, err = calculate(e), False
        except Exception as ex:  # noqa: BLE001 - any exception becomes a tool error
            res, err = f"{ex}", True
        out.write(json.dumps({"expr": e, "result": res, "error": err}) + "\n")
