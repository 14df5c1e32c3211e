// Package pycalc reproduces τ²'s `calculate` tool (airline and retail):
//
//	if not all(char in "0123456789+-*/(). " for char in expression):
//	    raise ValueError("Invalid characters in expression")
//	return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))
//
// It parses the Python expression grammar restricted to those characters
// (int and float literals, + - * / // **, unary signs, parentheses) and
// evaluates it with Python semantics: arbitrary-precision ints, true
// division to float, floor division, int ** negative int → float, float
// overflow → OverflowError, division by zero → ZeroDivisionError, a
// parenthesised empty expression is a tuple (float() rejects it).
package pycalc

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"tau2rl/tau2/pyjson"
)

// maxIntBits bounds intermediate integers (Python would grind on 9**9**9;
// τ² runs it in-process with no limit). Beyond it Calculate fails with an
// error instead of exhausting memory.
const maxIntBits = 1 << 16

// maxDepth bounds parenthesis / unary nesting (Python's parser limit is 200
// nested parentheses: "too many nested parentheses").
const maxDepth = 200

// Calculate evaluates expression like τ²'s calculate tool and returns the
// tool's string result (e.g. "4.0") or the Python exception text.
func Calculate(expression string) (string, error) {
	for _, r := range expression {
		if !strings.ContainsRune("0123456789+-*/(). ", r) {
			return "", errors.New("Invalid characters in expression")
		}
	}
	v, err := Eval(expression)
	if err != nil {
		return "", err
	}
	f, err := toFloat(v)
	if err != nil {
		return "", err
	}
	return pyjson.FloatRepr(Round2(f)), nil
}

// Round2 is Python's round(x, 2) for a float: the correctly rounded
// (round-half-even on the exact binary value) result.
func Round2(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	s := strconv.FormatFloat(x, 'f', 2, 64)
	r, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return x
	}
	if r == 0 {
		return math.Copysign(0, x)
	}
	return r
}

// Value is a Python number: *big.Int (int), float64 (float) or tuple
// (the empty tuple "()").
type Value any

type tuple struct{}

func toFloat(v Value) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case *big.Int:
		return intToFloat(x)
	}
	return 0, errors.New("float() argument must be a string or a real number, not 'tuple'")
}

func intToFloat(x *big.Int) (float64, error) {
	f, _ := new(big.Float).SetInt(x).Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("int too large to convert to float")
	}
	return f, nil
}

// Eval evaluates a restricted Python expression.
func Eval(expression string) (Value, error) {
	p := &parser{s: expression}
	p.skip()
	if p.i >= len(p.s) {
		return nil, errors.New("invalid syntax (<string>, line 0)")
	}
	v, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.i < len(p.s) {
		return nil, p.syntaxErrHere()
	}
	return v, nil
}

func syntaxErr() error { return errors.New("invalid syntax (<string>, line 1)") }

type parser struct {
	s     string
	i     int
	depth int // open parentheses
}

// syntaxErrHere is CPython's message for a parse failure at the current
// position: an unmatched ')' or input ending inside parentheses get their
// specific texts.
func (p *parser) syntaxErrHere() error {
	p.skip()
	switch {
	case p.i >= len(p.s) && p.depth > 0:
		return errors.New("'(' was never closed (<string>, line 1)")
	case p.i < len(p.s) && p.s[p.i] == ')' && p.depth == 0:
		return errors.New("unmatched ')' (<string>, line 1)")
	}
	return syntaxErr()
}

func (p *parser) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) peek(tok string) bool {
	p.skip()
	return strings.HasPrefix(p.s[p.i:], tok)
}

// expr := term (('+'|'-') term)*
func (p *parser) expr(depth int) (Value, error) {
	v, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return v, nil
		}
		op := p.s[p.i]
		p.i++
		w, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		if v, err = binop(op, v, w); err != nil {
			return nil, err
		}
	}
}

// term := factor (('*'|'/'|'//') factor)*
func (p *parser) term(depth int) (Value, error) {
	v, err := p.factor(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.skip()
		var op byte
		switch {
		case p.peek("**"):
			return v, nil
		case p.peek("//"):
			op = 'f'
			p.i += 2
		case p.peek("*"):
			op = '*'
			p.i++
		case p.peek("/"):
			op = '/'
			p.i++
		default:
			return v, nil
		}
		w, err := p.factor(depth)
		if err != nil {
			return nil, err
		}
		if v, err = binop(op, v, w); err != nil {
			return nil, err
		}
	}
}

// factor := ('+'|'-') factor | power
func (p *parser) factor(depth int) (Value, error) {
	if depth > maxDepth {
		return nil, errors.New("too many nested parentheses")
	}
	p.skip()
	if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
		op := p.s[p.i]
		p.i++
		v, err := p.factor(depth + 1)
		if err != nil {
			return nil, err
		}
		return unary(op, v)
	}
	return p.power(depth)
}

// power := atom trailer* ['**' factor], trailer := '(' [expr] ')': a call,
// which fails at run time since no number is callable (after its argument
// is evaluated, as in Python).
func (p *parser) power(depth int) (Value, error) {
	v, err := p.atom(depth)
	if err != nil {
		return nil, err
	}
	if p.peek("(") {
		p.i++
		p.depth++
		if !p.peek(")") {
			if _, err := p.expr(depth + 1); err != nil {
				return nil, err
			}
			if !p.peek(")") {
				return nil, p.syntaxErrHere()
			}
		}
		p.i++
		p.depth--
		return nil, fmt.Errorf("'%s' object is not callable", typeName(v))
	}
	if p.peek("**") {
		p.i += 2
		w, err := p.factor(depth + 1)
		if err != nil {
			return nil, err
		}
		return binop('p', v, w)
	}
	return v, nil
}

func (p *parser) atom(depth int) (Value, error) {
	p.skip()
	if p.i >= len(p.s) {
		return nil, p.syntaxErrHere()
	}
	c := p.s[p.i]
	if c == '(' {
		p.i++
		p.depth++
		if p.peek(")") {
			p.i++
			p.depth--
			return tuple{}, nil
		}
		v, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.peek(")") {
			return nil, p.syntaxErrHere()
		}
		p.i++
		p.depth--
		return v, nil
	}
	if c == '.' || (c >= '0' && c <= '9') {
		return p.number()
	}
	return nil, p.syntaxErrHere()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) number() (Value, error) {
	start := p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		p.i++
	}
	intPart := p.s[start:p.i]
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		fracStart := p.i
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
		if intPart == "" && p.i == fracStart {
			return nil, syntaxErr() // a lone "."
		}
		lit := p.s[start:p.i]
		if p.i < len(p.s) && (p.s[p.i] == '.' || isDigit(p.s[p.i])) {
			return nil, syntaxErr()
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, syntaxErr()
		}
		return f, nil
	}
	if len(intPart) > 1 && intPart[0] == '0' && strings.Trim(intPart, "0") != "" {
		return nil, errors.New("leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<string>, line 1)")
	}
	n, ok := new(big.Int).SetString(intPart, 10)
	if !ok {
		return nil, syntaxErr()
	}
	return n, nil
}

func typeName(v Value) string {
	switch v.(type) {
	case *big.Int:
		return "int"
	case float64:
		return "float"
	}
	return "tuple"
}

func unary(op byte, v Value) (Value, error) {
	switch x := v.(type) {
	case *big.Int:
		if op == '-' {
			return new(big.Int).Neg(x), nil
		}
		return x, nil
	case float64:
		if op == '-' {
			return -x, nil
		}
		return x, nil
	}
	sym := "-"
	if op == '+' {
		sym = "+"
	}
	return nil, fmt.Errorf("bad operand type for unary %s: 'tuple'", sym)
}

var opSym = map[byte]string{'+': "+", '-': "-", '*': "*", '/': "/", 'f': "//", 'p': "** or pow()"}

func binop(op byte, a, b Value) (Value, error) {
	ai, aInt := a.(*big.Int)
	bi, bInt := b.(*big.Int)
	_, aTup := a.(tuple)
	_, bTup := b.(tuple)
	if aTup || bTup {
		if aTup && bTup && op == '+' {
			return tuple{}, nil
		}
		return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", opSym[op], typeName(a), typeName(b))
	}
	if aInt && bInt {
		return intOp(op, ai, bi)
	}
	af, err := toFloat(a)
	if err != nil {
		return nil, err
	}
	bf, err := toFloat(b)
	if err != nil {
		return nil, err
	}
	return floatOp(op, af, bf)
}

func checkBits(x *big.Int) (Value, error) {
	if x.BitLen() > maxIntBits {
		return nil, errors.New("integer result too large")
	}
	return x, nil
}

func intOp(op byte, a, b *big.Int) (Value, error) {
	switch op {
	case '+':
		return checkBits(new(big.Int).Add(a, b))
	case '-':
		return checkBits(new(big.Int).Sub(a, b))
	case '*':
		if a.BitLen()+b.BitLen() > maxIntBits+1 {
			return nil, errors.New("integer result too large")
		}
		return checkBits(new(big.Int).Mul(a, b))
	case '/':
		if b.Sign() == 0 {
			return nil, errors.New("division by zero")
		}
		// Python's int true division is correctly rounded.
		f, _ := new(big.Rat).SetFrac(a, b).Float64()
		if math.IsInf(f, 0) {
			return nil, errors.New("integer division result too large for a float")
		}
		return f, nil
	case 'f':
		if b.Sign() == 0 {
			return nil, errors.New("integer division or modulo by zero")
		}
		q, r := new(big.Int).QuoRem(a, b, new(big.Int)) // truncated
		if r.Sign() != 0 && (r.Sign() < 0) != (b.Sign() < 0) {
			q.Sub(q, big.NewInt(1)) // floor
		}
		return q, nil
	case 'p':
		if b.Sign() < 0 {
			af, err := intToFloat(a)
			if err != nil {
				return nil, err
			}
			bf, err := intToFloat(b)
			if err != nil {
				return nil, err
			}
			if af == 0 {
				return nil, errors.New("0.0 cannot be raised to a negative power")
			}
			return floatOp('p', af, bf)
		}
		if a.CmpAbs(big.NewInt(1)) <= 0 {
			// 0, 1 and -1 to any non-negative power (0**0 == 1).
			switch {
			case b.Sign() == 0 || a.Cmp(big.NewInt(1)) == 0:
				return big.NewInt(1), nil
			case a.Sign() == 0:
				return big.NewInt(0), nil
			case b.Bit(0) == 1:
				return big.NewInt(-1), nil
			}
			return big.NewInt(1), nil
		}
		if !b.IsInt64() || int64(a.BitLen()-1)*b.Int64() > maxIntBits {
			return nil, errors.New("integer result too large")
		}
		return checkBits(new(big.Int).Exp(a, b, nil))
	}
	return nil, fmt.Errorf("pycalc: unknown operator %c", op)
}

func floatOp(op byte, a, b float64) (Value, error) {
	switch op {
	case '+':
		return a + b, nil
	case '-':
		return a - b, nil
	case '*':
		return a * b, nil
	case '/':
		if b == 0 {
			return nil, errors.New("float division by zero")
		}
		return a / b, nil
	case 'f':
		if b == 0 {
			return nil, errors.New("float floor division by zero")
		}
		return floorDiv(a, b), nil
	case 'p':
		return floatPow(a, b)
	}
	return nil, fmt.Errorf("pycalc: unknown operator %c", op)
}

// floorDiv is CPython's float_floor_div (Objects/floatobject.c: float_divmod).
func floorDiv(vx, wx float64) float64 {
	mod := math.Mod(vx, wx)
	div := (vx - mod) / wx
	if mod != 0 {
		if (wx < 0) != (mod < 0) {
			div -= 1.0
		}
	}
	if div != 0 {
		floordiv := math.Floor(div)
		if div-floordiv > 0.5 {
			floordiv += 1.0
		}
		return floordiv
	}
	return math.Copysign(0, vx/wx)
}

// floatPow is CPython's float_pow for the cases reachable here.
func floatPow(a, b float64) (Value, error) {
	if b == 0 {
		return 1.0, nil
	}
	if math.IsNaN(a) {
		if b == 0 {
			return 1.0, nil
		}
		return a, nil
	}
	if a == 0 && b < 0 && !math.IsInf(b, 0) {
		return nil, errors.New("0.0 cannot be raised to a negative power")
	}
	if a < 0 && b != math.Floor(b) && !math.IsInf(b, 0) {
		// Python returns a complex number, which float() rejects.
		return nil, errors.New("float() argument must be a string or a real number, not 'complex'")
	}
	var r float64
	switch {
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		r = math.Pow(a, b)
	case b == math.Trunc(b) && math.Abs(b) <= 1<<20:
		r = intPow(a, int64(b))
	case b == 0.5:
		r = math.Sqrt(a) // glibc's pow(x, 0.5) is the correctly rounded sqrt
	default:
		// Non-integer exponents: Go's Pow may differ from glibc's correctly
		// rounded pow in the last bit.
		r = math.Pow(a, b)
	}
	if math.IsInf(r, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
		return nil, errors.New("(34, 'Numerical result out of range')")
	}
	return r, nil
}

// intPow returns a**n correctly rounded (as glibc's pow is), computing the
// power exactly enough in 512-bit precision.
func intPow(a float64, n int64) float64 {
	const prec = 512
	neg := n < 0
	if neg {
		n = -n
	}
	base := new(big.Float).SetPrec(prec).SetFloat64(a)
	acc := new(big.Float).SetPrec(prec).SetInt64(1)
	for n > 0 {
		if n&1 == 1 {
			acc.Mul(acc, base)
		}
		n >>= 1
		if n > 0 {
			base.Mul(base, base)
		}
	}
	if neg {
		if acc.Sign() == 0 {
			return math.Inf(1)
		}
		acc.Quo(new(big.Float).SetPrec(prec).SetInt64(1), acc)
	}
	f, _ := acc.Float64()
	return f
}
