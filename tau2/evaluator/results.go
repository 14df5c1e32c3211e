package evaluator

import (
	"bytes"
	"fmt"
	"strings"

	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

// Results is a τ² results file (data_model/simulation.py Results, the
// monolithic "json" format: {timestamp, info, tasks, simulations, …}) kept
// as its original bytes plus the positions of its parts. Rewrite replaces
// only the simulations' reward_info values, so every other byte — unknown
// fields, number formatting, key order — survives a regrade.
type Results struct {
	// Raw is the file content.
	Raw []byte
	// Info is the parsed "info" object.
	Info *pyjson.Object
	// TaskSpans are the byte spans of the "tasks" entries (see Task).
	TaskSpans []Span
	// Sims are the simulations' spans, in file order (see Simulation).
	Sims []SimSpan

	style JSONStyle
}

// Span is a byte range [Start, End) of Results.Raw.
type Span struct{ Start, End int }

// SimSpan locates one simulation object and its reward_info.
type SimSpan struct {
	Span
	// RewardInfo is the span of the reward_info value; End == 0 when the
	// key is absent.
	RewardInfo Span
	// Column is the indentation of the simulation's keys (pretty files).
	Column int
	// insertAt, insertText: where and what to add when reward_info is
	// absent (before "messages", or after the last member).
	insertAt     int
	insertBefore bool   // insert `"reward_info": V,<ws>` at insertAt
	ws           string // whitespace that precedes a member key
}

// Simulation is the part of a SimulationRun that grading reads.
type Simulation struct {
	ID                string
	TaskID            string
	Trial             *int64
	TerminationReason string
	Messages          []Message
	// RewardInfo is the reward_info stored in the file (nil when absent or
	// null), for comparisons.
	RewardInfo *pyjson.Object
}

// Domain is info.environment_info.domain_name.
func (r *Results) Domain() (string, error) {
	ei, _ := r.Info.Get("environment_info")
	eo, ok := ei.(*pyjson.Object)
	if !ok {
		return "", fmt.Errorf("evaluator: results: info.environment_info missing")
	}
	d, err := reqStr(eo, "domain_name")
	if err != nil {
		return "", fmt.Errorf("evaluator: results: info.environment_info.%w", err)
	}
	return d, nil
}

// Solo reports τ²'s is_solo_mode: agent llm_agent_solo with dummy_user.
func (r *Results) Solo() bool {
	impl := func(key string) string {
		v, _ := r.Info.Get(key)
		o, _ := v.(*pyjson.Object)
		if o == nil {
			return ""
		}
		s, _ := o.Get("implementation")
		str, _ := s.(string)
		return str
	}
	return impl("agent_info") == "llm_agent_solo" && impl("user_info") == "dummy_user"
}

// NumTrials is info.num_trials (0 when absent).
func (r *Results) NumTrials() int {
	v, _ := r.Info.Get("num_trials")
	n, _ := v.(int64)
	return int(n)
}

// ParseResults scans a results file. It validates the document structure
// and parses info; tasks and simulations are parsed on demand (Task,
// Simulation), so workers can do it in parallel.
func ParseResults(b []byte) (*Results, error) {
	r := &Results{Raw: b}
	s := &scanner{b: b}
	s.ws()
	var infoSpan Span
	haveInfo, haveTasks := false, false
	first := true
	err := s.object(0, func(key string, keyStart int, ws string) error {
		if first {
			first = false
			r.style = styleFrom(ws, s.b, s.i)
		}
		start := s.i
		switch key {
		case "info":
			if err := s.value(1); err != nil {
				return err
			}
			infoSpan, haveInfo = Span{start, s.i}, true
		case "tasks":
			haveTasks = true
			return s.array(1, func() error {
				st := s.i
				if err := s.value(2); err != nil {
					return err
				}
				r.TaskSpans = append(r.TaskSpans, Span{st, s.i})
				return nil
			})
		case "simulations":
			if s.peek() == 'n' {
				return s.value(1)
			}
			return s.array(1, func() error {
				sp, err := s.simulation()
				if err != nil {
					return fmt.Errorf("simulations[%d]: %w", len(r.Sims), err)
				}
				r.Sims = append(r.Sims, sp)
				return nil
			})
		default:
			return s.value(1)
		}
		return nil
	})
	if err == nil {
		s.ws()
		if s.i != len(b) {
			err = s.errorf("extra data after the results object")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("evaluator: results: %w", err)
	}
	if !haveInfo || !haveTasks {
		return nil, fmt.Errorf("evaluator: results: info and tasks are required")
	}
	iv, err := pyjson.Loads(string(b[infoSpan.Start:infoSpan.End]))
	if err != nil {
		return nil, fmt.Errorf("evaluator: results: info: %w", err)
	}
	var ok bool
	if r.Info, ok = iv.(*pyjson.Object); !ok {
		return nil, fmt.Errorf("evaluator: results: info is %s, not an object", pyjson.TypeName(iv))
	}
	return r, nil
}

// Task parses tasks[i].
func (r *Results) Task(i int) (*data.Task, error) {
	sp := r.TaskSpans[i]
	v, err := pyjson.Loads(string(r.Raw[sp.Start:sp.End]))
	if err != nil {
		return nil, fmt.Errorf("evaluator: results: tasks[%d]: %w", i, err)
	}
	t, err := data.ParseTask(v)
	if err != nil {
		return nil, fmt.Errorf("evaluator: results: tasks[%d]: %w", i, err)
	}
	return t, nil
}

// Simulation parses simulations[i].
func (r *Results) Simulation(i int) (*Simulation, error) {
	sp := r.Sims[i]
	v, err := pyjson.Loads(string(r.Raw[sp.Start:sp.End]))
	if err != nil {
		return nil, fmt.Errorf("evaluator: results: simulations[%d]: %w", i, err)
	}
	sim, err := parseSimulation(v)
	if err != nil {
		return nil, fmt.Errorf("evaluator: results: simulations[%d]: %w", i, err)
	}
	return sim, nil
}

func parseSimulation(v any) (*Simulation, error) {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("expected an object, got %s", pyjson.TypeName(v))
	}
	sim := &Simulation{}
	var err error
	if sim.ID, err = reqStr(o, "id"); err != nil {
		return nil, err
	}
	if sim.TaskID, err = reqStr(o, "task_id"); err != nil {
		return nil, err
	}
	if sim.TerminationReason, err = reqStr(o, "termination_reason"); err != nil {
		return nil, err
	}
	if !ValidTermination(sim.TerminationReason) {
		return nil, fmt.Errorf("termination_reason: unknown value %q", sim.TerminationReason)
	}
	if tv, _ := o.Get("trial"); tv != nil {
		n, ok := tv.(int64)
		if !ok {
			return nil, fmt.Errorf("trial: expected an int, got %s", pyjson.TypeName(tv))
		}
		sim.Trial = &n
	}
	if mv, _ := o.Get("mode"); mv != nil && mv != "half_duplex" {
		return nil, fmt.Errorf("mode %s: only half-duplex (text) simulations can be graded", pyjson.Repr(mv))
	}
	if tv, _ := o.Get("ticks"); tv != nil {
		return nil, fmt.Errorf("full-duplex simulations (ticks) cannot be graded")
	}
	mv, _ := o.Get("messages")
	if sim.Messages, err = ParseMessages(mv); err != nil {
		return nil, err
	}
	if rv, _ := o.Get("reward_info"); rv != nil {
		if sim.RewardInfo, ok = rv.(*pyjson.Object); !ok {
			return nil, fmt.Errorf("reward_info: expected an object, got %s", pyjson.TypeName(rv))
		}
	}
	return sim, nil
}

// EncodeRewardInfo renders a reward_info value for simulations[i] in the
// file's style (pydantic JSON, same indentation as the file).
func (r *Results) EncodeRewardInfo(i int, ri *RewardInfo) ([]byte, error) {
	st := r.style
	if st.Indent > 0 {
		st.Base = r.Sims[i].Column
	}
	return AppendJSON(nil, ri.ToValue(), st)
}

// Rewrite returns the file with simulations[i].reward_info replaced by
// repl[i] (encoded values, see EncodeRewardInfo; nil keeps the original).
// A simulation without a reward_info key gets one before "messages" (its
// place in τ²'s field order), else after its last member.
func (r *Results) Rewrite(repl [][]byte) ([]byte, error) {
	if len(repl) != len(r.Sims) {
		return nil, fmt.Errorf("evaluator: results: %d replacements for %d simulations", len(repl), len(r.Sims))
	}
	var out bytes.Buffer
	out.Grow(len(r.Raw) + len(r.Raw)/8)
	pos := 0
	for i, sp := range r.Sims {
		v := repl[i]
		if v == nil {
			continue
		}
		if sp.RewardInfo.End > 0 {
			out.Write(r.Raw[pos:sp.RewardInfo.Start])
			out.Write(v)
			pos = sp.RewardInfo.End
			continue
		}
		out.Write(r.Raw[pos:sp.insertAt])
		colon := `": `
		if r.style.Indent == 0 && !r.style.Spaced {
			colon = `":`
		}
		if sp.insertBefore {
			out.WriteString(`"reward_info` + colon)
			out.Write(v)
			out.WriteString(",")
			out.WriteString(sp.ws)
		} else {
			out.WriteString(",")
			out.WriteString(sp.ws)
			out.WriteString(`"reward_info` + colon)
			out.Write(v)
		}
		pos = sp.insertAt
	}
	out.Write(r.Raw[pos:])
	return out.Bytes(), nil
}

// styleFrom derives the document style from the whitespace before the
// first top-level key and the bytes after its colon.
func styleFrom(ws string, b []byte, valueStart int) JSONStyle {
	if nl := strings.LastIndexByte(ws, '\n'); nl >= 0 {
		return JSONStyle{Indent: len(ws) - nl - 1}
	}
	// Compact: json.dumps puts a space after the colon, pydantic does not.
	return JSONStyle{Spaced: valueStart > 0 && b[valueStart-1] == ' '}
}

// scanner walks JSON structure without building values, recording spans.
type scanner struct {
	b []byte
	i int
}

const maxScanDepth = 10000

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// object iterates an object's members; fn is called with s.i at the value
// (after whitespace) and must consume it. ws is the whitespace before the
// key.
func (s *scanner) object(depth int, fn func(key string, keyStart int, ws string) error) error {
	if depth > maxScanDepth {
		return s.errorf("nesting too deep")
	}
	if s.peek() != '{' {
		return s.errorf("expected an object")
	}
	s.i++
	for n := 0; ; n++ {
		wsStart := s.i
		s.ws()
		if s.peek() == '}' && n == 0 {
			s.i++
			return nil
		}
		ws := string(s.b[wsStart:s.i])
		keyStart := s.i
		key, err := s.key()
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() != ':' {
			return s.errorf("expected ':'")
		}
		s.i++
		s.ws()
		if err := fn(key, keyStart, ws); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("expected ',' or '}'")
		}
	}
}

// array iterates an array's elements; fn is called with s.i at the element.
func (s *scanner) array(depth int, fn func() error) error {
	if depth > maxScanDepth {
		return s.errorf("nesting too deep")
	}
	if s.peek() != '[' {
		return s.errorf("expected a list")
	}
	s.i++
	for n := 0; ; n++ {
		s.ws()
		if s.peek() == ']' && n == 0 {
			s.i++
			return nil
		}
		if err := fn(); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.errorf("expected ',' or ']'")
		}
	}
}

func (s *scanner) key() (string, error) {
	start := s.i
	esc, err := s.str()
	if err != nil {
		return "", err
	}
	raw := s.b[start+1 : s.i-1]
	if !esc {
		return string(raw), nil
	}
	v, err := pyjson.Loads(string(s.b[start:s.i]))
	if err != nil {
		return "", s.errorf("bad key: %v", err)
	}
	return v.(string), nil
}

// str skips a string; it reports whether it held escapes.
func (s *scanner) str() (bool, error) {
	if s.peek() != '"' {
		return false, s.errorf("expected a string")
	}
	esc := false
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '\\':
			esc = true
			s.i++
		case c == '"':
			s.i++
			return esc, nil
		case c < 0x20:
			return false, s.errorf("control character in string")
		}
	}
	return false, s.errorf("unterminated string")
}

// value skips any JSON value (Python's NaN/Infinity included).
func (s *scanner) value(depth int) error {
	switch c := s.peek(); c {
	case '{':
		return s.object(depth+1, func(string, int, string) error { return s.value(depth + 1) })
	case '[':
		return s.array(depth+1, func() error { return s.value(depth + 1) })
	case '"':
		_, err := s.str()
		return err
	case 0:
		return s.errorf("unexpected end of input")
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		s.i++
	}
	tok := string(s.b[start:s.i])
	if !scalarToken(tok) {
		s.i = start
		return s.errorf("invalid value %q", tok)
	}
	return nil
}

// scalarToken is a quick check of a literal or number token; values that
// grading reads are validated again by pyjson.Loads.
func scalarToken(tok string) bool {
	switch tok {
	case "true", "false", "null", "NaN", "Infinity", "-Infinity":
		return true
	case "":
		return false
	}
	if c := tok[0]; c != '-' && (c < '0' || c > '9') {
		return false
	}
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
		default:
			return false
		}
	}
	return true
}

// simulation scans one simulation object.
func (s *scanner) simulation() (SimSpan, error) {
	sp := SimSpan{Span: Span{Start: s.i}}
	if s.peek() != '{' {
		return sp, s.errorf("expected an object")
	}
	msgAt, msgWS := -1, ""
	lastEnd, lastWS := -1, ""
	err := s.object(2, func(key string, keyStart int, ws string) error {
		if nl := strings.LastIndexByte(ws, '\n'); nl >= 0 {
			sp.Column = len(ws) - nl - 1
		}
		start := s.i
		if err := s.value(2); err != nil {
			return err
		}
		switch key {
		case "reward_info":
			sp.RewardInfo = Span{start, s.i}
		case "messages":
			msgAt, msgWS = keyStart, ws
		}
		lastEnd, lastWS = s.i, ws
		return nil
	})
	if err != nil {
		return sp, err
	}
	sp.End = s.i
	switch {
	case sp.RewardInfo.End > 0:
	case msgAt >= 0:
		sp.insertAt, sp.insertBefore, sp.ws = msgAt, true, msgWS
	case lastEnd >= 0:
		sp.insertAt, sp.ws = lastEnd, lastWS
	default:
		return sp, fmt.Errorf("empty simulation object")
	}
	return sp, nil
}
