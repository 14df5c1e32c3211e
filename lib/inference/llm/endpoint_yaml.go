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
func (c *EndpointConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "" {
			return fmt.Errorf("llm: line %d: empty endpoint URL", n.Line)
		}
		*c = EndpointConfig{BaseURL: n.Value}
		return nil
	}
	var buf bytes.Buffer
	if err := yaml.NewEncoder(&buf).Encode(n); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	type plain EndpointConfig // no UnmarshalYAML: no recursion
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("llm: endpoint at line %d: %w", n.Line, err)
	}
	*c = EndpointConfig(p)
	return nil
}
