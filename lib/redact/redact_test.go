package redact

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	const key = "sk-proj-AbCdEf0123456789xyzXYZ"
	tests := []struct {
		name, in string
		gone     []string // substrings that must not survive
		kept     []string // substrings that must survive
	}{
		{"reflected header", `{"error":"bad request","headers":{"Authorization":"Bearer ` + key + `"}}`, []string{key, "AbCdEf"}, []string{`"error":"bad request"`}},
		{"header line", "Authorization: Bearer opaque-token-1234567890\nHost: x", []string{"opaque-token"}, []string{"Host: x"}},
		{"basic auth", "authorization=Basic dXNlcjpwYXNz", []string{"dXNlcjpwYXNz"}, nil},
		{"bearer in prose", "invalid credentials: bearer abcdefgh12345678 rejected", []string{"abcdefgh12345678"}, []string{"rejected"}},
		{"bare openai key", "Incorrect API key provided: " + key + ". You can find", []string{key}, []string{"Incorrect API key provided", "You can find"}},
		{"anthropic", "key sk-ant-api03-abcdefghijklmnopqrstuvwx", []string{"abcdefghijklmnop"}, nil},
		{"json field", `{"api_key": "opaque1234", "model": "gpt-4.1"}`, []string{"opaque1234"}, []string{`"model": "gpt-4.1"`}},
		{"yaml field", "  api_key: opaque1234\n  api_key_env: OPENAI_API_KEY", []string{"opaque1234"}, []string{"api_key_env: OPENAI_API_KEY"}},
		{"query", "GET /v1/x?api_key=opaque1234&model=m", []string{"opaque1234"}, []string{"model=m"}},
		{"password", `password="hunter22"`, []string{"hunter22"}, nil},
		{"url userinfo", "dial https://alice:hunter22@proxy:8080/v1 failed", []string{"hunter22"}, []string{"alice", "proxy:8080/v1 failed"}},
		{"hugging face", "token hf_abcdefghijklmnopqrstuvwxyz012345", []string{"hf_abcdefghij"}, nil},
		{"github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", []string{"ghp_abcdefghij"}, nil},
		{"aws", "AKIAIOSFODNN7EXAMPLE used", []string{"AKIAIOSFODNN7EXAMPLE"}, []string{"used"}},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmnop", []string{"eyJzdWIi"}, nil},
		{"harmless", `{"max_tokens": 512, "prompt_tokens": 3, "tokenizer": "qwen3", "author": "x", "task-abcdefghijklmnopqrst": 1}`, nil,
			[]string{`"max_tokens": 512`, `"prompt_tokens": 3`, `"tokenizer": "qwen3"`, `"author": "x"`, "task-abcdefghijklmnopqrst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			for _, g := range tt.gone {
				if strings.Contains(got, g) {
					t.Errorf("String(%q) = %q: %q survived", tt.in, got, g)
				}
			}
			for _, k := range tt.kept {
				if !strings.Contains(got, k) {
					t.Errorf("String(%q) = %q: lost %q", tt.in, got, k)
				}
			}
			if len(tt.gone) > 0 && !strings.Contains(got, Mask) {
				t.Errorf("String(%q) = %q: no %s marker", tt.in, got, Mask)
			}
			if len(tt.gone) == 0 && got != tt.in {
				t.Errorf("String(%q) = %q: changed text without a credential", tt.in, got)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	for name, want := range map[string]bool{
		"api_key": true, "apiKey": true, "x-api-key": true, "password": true, "client_secret": true,
		"access_token": true, "token": true, "api_key_env": false, "api_key_file": false, "password_env": false,
		"password_file": false, "max_tokens": false, "tokenizer": false, "username": false, "base_url": false,
	} {
		if got := IsSecretKey(name); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", name, got, want)
		}
	}
}

func FuzzString(f *testing.F) {
	f.Add(`{"error":{"message":"Incorrect API key provided: sk-abcdefghijklmnopqrstu"}}`)
	f.Add("Authorization: Bearer x")
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if String(got) != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, String(got))
		}
	})
}
