package proxy

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"tau2rl/lib/inference/chattemplate"
)

// FuzzReadChat: any request body is either a chat call the template can
// render or an OpenAI error with a 4xx status; never a panic.
func FuzzReadChat(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto","n":2,"stop":["x"],"max_tokens":5}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`,
		`{"messages":[{"role":"developer","content":"d"}],"chat_template_kwargs":{"enable_thinking":false},"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[]}`, `[]`, `{"messages":[{"role":"tool"}]}`, `{"n":-1}`, `{"stop":[1]}`,
	} {
		f.Add([]byte(s))
	}
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		c, err := readChat(r, cfg, &internCache{})
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 || ae.Type == "" {
				t.Fatalf("error %v is not a 4xx OpenAI error", err)
			}
			return
		}
		if c.n < 1 || c.n > cfg.Limits.MaxN || len(c.msgs) == 0 || len(c.keys) != len(c.msgs) {
			t.Fatalf("accepted call out of bounds: n %d, %d messages", c.n, len(c.msgs))
		}
		_, _ = chattemplate.Render(c.msgs, c.opts)
	})
}

// FuzzCredentials: any Authorization header parses or is a 400 that
// quotes no part of the header (it carries the key); accepted names obey
// the id rules.
func FuzzCredentials(f *testing.F) {
	for _, s := range []string{"Bearer sk", "Bearer sk;session=a;task=t%20x;group=g;trial=3;domain=airline", "Bearer session=a", "Bearer ;;=", "Basic xyz", "Bearer k;trial=-1", "Bearer k;x=%zz",
		"Bearer c2stc2VjcmV0==", "Bearer k;session=%FF", "Bearer k;session=a%00b", "Bearer secretkey;secretfield=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, auth string) {
		r := httptest.NewRequest("GET", "/v1/models", nil)
		r.Header.Set("Authorization", auth)
		_, meta, err := parseCredentials(r)
		if err != nil && err.Status != 400 && err.Status != 401 { // 401: a scheme other than Bearer
			t.Fatalf("status %d", err.Status)
		}
		if err == nil && meta.Trial < 0 {
			t.Fatalf("negative trial accepted")
		}
		if err == nil {
			for _, id := range []string{meta.ID, meta.Task, meta.Group} {
				if id != "" && checkID("id", id) != nil {
					t.Fatalf("id %q accepted against the rules", id)
				}
			}
		}
		if err != nil {
			token := strings.TrimPrefix(auth, "Bearer ")
			for _, part := range strings.FieldsFunc(token, func(r rune) bool { return r == ';' || r == '=' }) {
				// Runs of lowercase letters and spaces may be words of
				// the message itself ("bearer", "session").
				words := strings.Trim(part, "abcdefghijklmnopqrstuvwxyz ") == ""
				if len(part) >= 6 && !words && strings.Contains(err.Message, part) {
					t.Fatalf("error %q quotes %q from the header", err.Message, part)
				}
			}
		}
	})
}
