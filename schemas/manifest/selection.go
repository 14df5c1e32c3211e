package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"tau2rl/schemas/dataset"
)

// MarshalJSON writes the selection with the keys a user configures (filter.min_policy_version,
// date_from: the YAML keys of dataset.Filter and Config), leaving out filters that are not set,
// so the manifest and the card's "Selection" line say what was asked in the words used to ask
// it. dataset.Filter has YAML tags only; encoding/json would use its Go field names.
func (s Selection) MarshalJSON() ([]byte, error) {
	f, err := filterKeys(s.Filter)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Filter   map[string]any `json:"filter"`
		DateFrom string         `json:"date_from,omitempty"`
		DateTo   string         `json:"date_to,omitempty"`
	}{f, s.DateFrom, s.DateTo})
}

// UnmarshalJSON reads what MarshalJSON writes, and the manifests of earlier releases, whose
// filter used the Go field names (MinPolicyVersion).
func (s *Selection) UnmarshalJSON(b []byte) error {
	var raw struct {
		Filter   json.RawMessage `json:"filter"`
		DateFrom string          `json:"date_from"`
		DateTo   string          `json:"date_to"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = Selection{DateFrom: raw.DateFrom, DateTo: raw.DateTo}
	if len(raw.Filter) == 0 || bytes.Equal(raw.Filter, []byte("null")) {
		return nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw.Filter, &keys); err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	for k := range keys {
		if k != "" && unicode.IsUpper(rune(k[0])) {
			return json.Unmarshal(raw.Filter, &s.Filter) // a manifest written before the keys were the config's
		}
	}
	// JSON is YAML: decoding it as YAML matches the config keys.
	if err := yaml.Unmarshal(raw.Filter, &s.Filter); err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	return nil
}

// filterKeys is f as its YAML keys, without the unset (null, empty, false) ones.
func filterKeys(f dataset.Filter) (map[string]any, error) {
	y, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(y, &m); err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case bool:
			if !v {
				delete(m, k)
			}
		case []any:
			if len(v) == 0 {
				delete(m, k)
			}
		case string:
			if strings.TrimSpace(v) == "" {
				delete(m, k)
			}
		}
	}
	return m, nil
}
