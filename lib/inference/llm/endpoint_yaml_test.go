package llm

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestEndpointConfigYAML(t *testing.T) {
	tests := []struct {
		name, in string
		want     []EndpointConfig
		wantErr  string
	}{
		{name: "bare URLs", in: "[http://a:1, http://b:2/v1]",
			want: []EndpointConfig{withBase(DefaultEndpointConfig(), "http://a:1"), withBase(DefaultEndpointConfig(), "http://b:2/v1")}},
		{name: "mapping", in: "[{base_url: http://a:1, name: a, max_retries: 5}]",
			want: []EndpointConfig{func() EndpointConfig {
				c := withBase(DefaultEndpointConfig(), "http://a:1")
				c.Name, c.MaxRetries = "a", 5
				return c
			}()}},
		{name: "explicit zero", in: "[{base_url: http://a:1, max_retries: 0}]",
			want: []EndpointConfig{func() EndpointConfig {
				c := withBase(DefaultEndpointConfig(), "http://a:1")
				c.MaxRetries = 0
				return c
			}()}},
		{name: "unknown key", in: "[{base_url: http://a:1, retries: 5}]", wantErr: "field retries not found"},
		{name: "empty URL", in: "['']", wantErr: "empty endpoint URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []EndpointConfig
			err := yaml.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v", got)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("endpoint %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func withBase(c EndpointConfig, url string) EndpointConfig {
	c.BaseURL = url
	return c
}

// TestEndpointConfigYAMLKeepsOtherFields: decoding a mapping into an endpoint that already holds
// values (the defaults a binary starts from, or an earlier --config file) sets only the keys the
// mapping names. It used to decode into a zero value: one key wiped max_retries, the timeouts and
// the concurrency limit.
func TestEndpointConfigYAMLKeepsOtherFields(t *testing.T) {
	type cfg struct {
		User  EndpointConfig `yaml:"user_endpoint"`
		Judge ChatConfig     `yaml:"judge"`
	}
	c := cfg{User: DefaultEndpointConfig(), Judge: DefaultChatConfig()}
	c.User.MaxRetries = 7 // as an earlier layer set it
	for _, doc := range []string{"user_endpoint: {api_key_env: OPENAI_API_KEY}", "judge: {endpoint: {base_url: http://j/v1}, model: m}",
		"user_endpoint: http://u/v1"} {
		dec := yaml.NewDecoder(strings.NewReader(doc))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			t.Fatal(err)
		}
	}
	wantUser := DefaultEndpointConfig()
	wantUser.MaxRetries, wantUser.APIKeyEnv, wantUser.BaseURL = 7, "OPENAI_API_KEY", "http://u/v1"
	if c.User != wantUser {
		t.Errorf("user_endpoint = %+v, want %+v", c.User, wantUser)
	}
	wantJudge := DefaultChatConfig()
	wantJudge.Endpoint.BaseURL, wantJudge.Model = "http://j/v1", "m"
	if c.Judge != wantJudge {
		t.Errorf("judge = %+v, want %+v", c.Judge, wantJudge)
	}
}

func TestResolveAPIKey(t *testing.T) {
	t.Setenv("TAU2RL_TEST_KEY", " sk-env \n")
	file := t.TempDir() + "/key"
	if err := os.WriteFile(file, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     EndpointConfig
		want    string
		wantErr string
	}{
		{"none", EndpointConfig{}, "", ""},
		{"inline", EndpointConfig{APIKey: "sk-inline"}, "sk-inline", ""},
		{"env", EndpointConfig{APIKeyEnv: "TAU2RL_TEST_KEY"}, "sk-env", ""},
		{"file", EndpointConfig{APIKeyFile: file}, "sk-file", ""},
		{"unset env", EndpointConfig{APIKeyEnv: "TAU2RL_TEST_UNSET"}, "", "is empty or unset"},
		{"missing file", EndpointConfig{APIKeyFile: file + ".nope"}, "", "no such file"},
		{"two sources", EndpointConfig{APIKey: "a", APIKeyEnv: "TAU2RL_TEST_KEY"}, "", "only one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.BaseURL = "http://127.0.0.1:1"
			ep, err := NewEndpoint(tt.cfg, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ep.cfg.APIKey != tt.want {
				t.Fatalf("key = %q, want %q", ep.cfg.APIKey, tt.want)
			}
		})
	}
}
