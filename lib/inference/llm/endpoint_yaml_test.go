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
			want: []EndpointConfig{{BaseURL: "http://a:1"}, {BaseURL: "http://b:2/v1"}}},
		{name: "mapping", in: "[{base_url: http://a:1, name: a, max_retries: 5}]",
			want: []EndpointConfig{{BaseURL: "http://a:1", Name: "a", MaxRetries: 5}}},
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
