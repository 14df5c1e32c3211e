package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
)

// The Authorization scheme is case-insensitive (RFC 9110 §11.1: "bearer"
// and "BEARER" are Bearer), and a header in another scheme (Basic, Token)
// is a 401 that says to use Bearer, not a 400 about bearer token fields it
// never had. Found from outside: `Authorization: bearer sk-good;session=a`
// was a 401 "Incorrect API key" with a valid key, and the same header with
// auth disabled a 400.
func TestAuthorizationScheme(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disabled bool
		auth     string
		status   int
		code     string // error code, or "" for a success
		message  string // a substring of the error message
	}{
		{"Bearer", false, "Bearer sk-good;session=a1", 200, "", ""},
		{"lowercase bearer", false, "bearer sk-good;session=a2", 200, "", ""},
		{"uppercase bearer", false, "BEARER sk-good;session=a3", 200, "", ""},
		{"bearer, two spaces", false, "bearer  sk-good;session=a4", 200, "", ""},
		{"no scheme (the key alone)", false, "sk-good;session=a5", 200, "", ""},
		{"Basic", false, "Basic c2stZ29vZDo=", 401, "invalid_api_key", "Bearer"},
		{"Token", false, "Token sk-good;session=a6", 401, "invalid_api_key", "Bearer"},
		{"lowercase bearer, auth disabled", true, "bearer session=b1", 200, "", ""},
		{"Basic, auth disabled", true, "Basic c2Vzc2lvbj1iMg==", 401, "invalid_api_key", "Bearer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TAU2_PROXY_TEST_KEYS", "sk-good")
			h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) {
				if tc.disabled {
					c.Auth = proxy.AuthConfig{Disabled: true}
				} else {
					c.Auth = proxy.AuthConfig{APIKeysEnv: "TAU2_PROXY_TEST_KEYS"}
				}
			})
			req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
			req.Header.Set("Authorization", tc.auth)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%q: %d %s, want %d", tc.auth, resp.StatusCode, raw, tc.status)
			}
			if tc.code == "" {
				return
			}
			var out struct {
				Error struct{ Type, Code, Message string }
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("%q: %v: %s", tc.auth, err, raw)
			}
			if out.Error.Type != "authentication_error" || out.Error.Code != tc.code || !strings.Contains(out.Error.Message, tc.message) {
				t.Fatalf("%q: %+v, want authentication_error %s mentioning %q", tc.auth, out.Error, tc.code, tc.message)
			}
			if strings.Contains(out.Error.Message, "c2") {
				t.Fatalf("%q: the message quotes the credential: %s", tc.auth, out.Error.Message)
			}
		})
	}
}
