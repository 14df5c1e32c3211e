package llm

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// UnmarshalYAML lets a configuration name an endpoint by its URL alone
// (`endpoints: [http://10.0.0.5:30000]`, or on the command line
// `reload.endpoints=[http://host:30000]`) as well as by a full mapping. A
// mapping is decoded strictly: an unknown key is an error, not a silent default.
//
// Defaults follow the one rule every tau2rl configuration uses (Prometheus's
// `*c = DefaultX; type plain X; unmarshal((*plain)(c))`, adapted to layered
// configuration): a mapping sets only the keys it names and leaves the others
// as they were. A value that already holds something keeps it — the defaults
// the binary started from (DefaultChatConfig's 120 s timeout for a judge),
// then each --config file and key=value override in turn — so
// `user_endpoint.api_key_env=OPENAI_API_KEY` does not reset max_retries. A
// fresh value (a list element, which YAML decodes into a zero value) starts
// from DefaultEndpointConfig.
func (c *EndpointConfig) UnmarshalYAML(n *yaml.Node) error {
	if *c == (EndpointConfig{}) {
		*c = DefaultEndpointConfig()
	}
	if n.Kind == yaml.ScalarNode {
		if n.Value == "" {
			return fmt.Errorf("llm: line %d: empty endpoint URL", n.Line)
		}
		c.BaseURL = n.Value
		return nil
	}
	type plain EndpointConfig // no UnmarshalYAML: no recursion
	if err := decodeStrict(n, (*plain)(c)); err != nil {
		return fmt.Errorf("llm: endpoint at line %d: %w", n.Line, err)
	}
	return nil
}

// decodeStrict decodes n into out, which keeps the fields n does not name,
// rejecting keys out has no field for (yaml.Node.Decode alone ignores them).
func decodeStrict(n *yaml.Node, out any) error {
	var buf bytes.Buffer
	if err := yaml.NewEncoder(&buf).Encode(n); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	return dec.Decode(out)
}
