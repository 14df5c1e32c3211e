// Package redact removes credentials from text that leaves the process: upstream error bodies
// stored in results files and trajectories (info.error, the error column), log lines, and
// --print-config output. Servers echo requests back in their error bodies (a proxy that reflects
// the Authorization header, a gateway that quotes the API key it rejected), so anything a
// server said may carry the key the client sent; every such string goes through String before it
// is stored or logged.
//
// It recognises credentials by context (an Authorization header, a bearer token, a secret-named
// JSON, YAML or query field, a URL's user:password) and by shape (the key formats of OpenAI,
// Anthropic, Hugging Face, GitHub, Slack, AWS and Google, and JWTs). Recognising by shape alone
// would miss opaque keys; by context alone, a key quoted without its header. What it replaces
// becomes Mask, so a reader still sees that a credential was there.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces every credential found.
const Mask = "[REDACTED]"

// secretKey matches the names of fields that hold a secret (api_key, apiKey, x-api-key,
// password, client_secret, access_token, …). Names that point at a secret rather than hold it
// (api_key_env, password_file) are not secret-named: see IsSecretKey.
const secretKey = `(?:[A-Za-z0-9]*[_-])?(?:api[_-]?key|apikey|password|passwd|secret|token|access[_-]?key|secret[_-]?key|private[_-]?key|credential|auth)`

var rules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Authorization: Bearer xyz / Authorization: Basic xyz / "authorization": "…".
	{regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s"',}]+`), "${1}" + Mask},
	// A bearer token anywhere else ("Bearer sk-…" quoted in a message).
	{regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}`), "${1}" + Mask},
	// JSON or YAML fields with a secret name: "api_key": "…", api_key: …, password=….
	{regexp.MustCompile(`(?i)(["']?\b` + secretKey + `["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&}"']+)`), "${1}" + Mask},
	// URL user:password@.
	{regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@`), "${1}" + Mask + "@"},
	// Known key shapes.
	{regexp.MustCompile(`\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}`), Mask},          // OpenAI, Anthropic
	{regexp.MustCompile(`\bhf_[A-Za-z0-9]{20,}`), Mask},                                           // Hugging Face
	{regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}`), Mask},          // GitHub
	{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), Mask},                                 // Slack
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`), Mask},                                   // AWS access key id
	{regexp.MustCompile(`\bAIza[A-Za-z0-9_-]{35}`), Mask},                                         // Google API key
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), Mask}, // JWT
}

// String returns s with every credential it recognises replaced by Mask. Text without one is
// returned unchanged (and without allocating when no rule's prefix occurs).
func String(s string) string {
	for _, r := range rules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}

// IsSecretKey reports whether a configuration or JSON field of this name holds a secret itself
// (api_key, password, client_secret, token) rather than naming where one is (api_key_env,
// password_file) or being a public setting (max_tokens, tokenizer).
func IsSecretKey(name string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	for _, suffix := range []string{"_env", "_file", "_path", "_dir"} {
		if strings.HasSuffix(n, suffix) {
			return false
		}
	}
	return secretName.MatchString(n)
}

var secretName = regexp.MustCompile(`^` + secretKey + `$`)
