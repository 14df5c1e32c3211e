package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"tau2rl/lib/redact"
)

// Options are the settings cli itself consumes. They may come from flags, from
// key=value overrides or from the top level of the YAML file, and are never
// passed on to the binary's own configuration.
type Options struct {
	Help        bool
	PrintConfig bool
	ConfigFile  string
	MetricsAddr *string
	LogLevel    string
	LogFormat   string
	Overrides   []string
}

// reservedKeys are the top-level keys that cli consumes; a binary's config
// struct must not use them.
var reservedKeys = map[string]bool{"metrics_addr": true, "log_level": true, "log_format": true}

// Parse reads args into cfg, which must be a pointer to a struct with yaml
// tags already holding its defaults. Precedence, lowest first: defaults, the
// YAML file of --config, then key=value overrides in order, then the flags
// --metrics-addr, --log-level and --log-format. Unknown keys are
// errors (a typo must not silently fall back to a default).
func Parse(args []string, cfg any) (Options, error) {
	var o Options
	// The flags --metrics-addr, --log-level and --log-format are applied
	// last: an explicit flag beats the same key (metrics_addr, log_level,
	// log_format) in the --config file or a key=value, which are read after
	// the flags are seen. (They were recorded as seen, so the file's value
	// silently replaced the flag's.)
	var flagMetrics, flagLevel, flagFormat *string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "-h", "--help", "-help", "help":
			o.Help = true
			continue
		case "--print-config":
			o.PrintConfig = true
			continue
		case "--config", "-config", "-c", "--metrics-addr", "--log-level", "--log-format":
			if !hasVal {
				if i+1 >= len(args) {
					return o, fmt.Errorf("%w: %s needs a value", ErrUsage, name)
				}
				i++
				val = args[i]
			}
			switch name {
			case "--metrics-addr":
				v := val
				flagMetrics = &v
			case "--log-level":
				flagLevel = &val
			case "--log-format":
				flagFormat = &val
			default:
				o.ConfigFile = val
			}
			continue
		}
		if strings.HasPrefix(a, "-") {
			return o, fmt.Errorf("%w: unknown flag %s", ErrUsage, a)
		}
		if !hasVal || name == "" {
			return o, fmt.Errorf("%w: argument %q is not key=value", ErrUsage, a)
		}
		o.Overrides = append(o.Overrides, a)
	}
	if o.Help {
		return o, nil
	}
	if o.ConfigFile != "" {
		data, err := os.ReadFile(o.ConfigFile)
		if err != nil {
			return o, fmt.Errorf("%w: config: %w", ErrUsage, err)
		}
		if err := o.applyYAML(data, cfg, o.ConfigFile); err != nil {
			return o, fmt.Errorf("%w: %w", ErrUsage, err)
		}
	}
	for _, kv := range o.Overrides {
		k, v, _ := strings.Cut(kv, "=")
		doc, err := overrideDoc(k, v)
		if err != nil {
			return o, fmt.Errorf("%w: override %s: %v", ErrUsage, kv, err)
		}
		if err := o.applyYAML(doc, cfg, "override "+kv); err != nil {
			return o, fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	if flagMetrics != nil {
		o.MetricsAddr = flagMetrics
	}
	if flagLevel != nil {
		o.LogLevel = *flagLevel
	}
	if flagFormat != nil {
		o.LogFormat = *flagFormat
	}
	return o, nil
}

// applyYAML decodes a YAML document into cfg strictly, after taking out the
// reserved keys that cli consumes itself.
func (o *Options) applyYAML(data []byte, cfg any, origin string) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("%s: %w", origin, err)
	}
	if len(root.Content) == 0 {
		return nil // an empty file sets nothing
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: top level must be a mapping of keys to values", origin)
	}
	kept := m.Content[:0:0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		if reservedKeys[key.Value] {
			switch key.Value {
			case "metrics_addr":
				v := val.Value
				o.MetricsAddr = &v
			case "log_level":
				o.LogLevel = val.Value
			case "log_format":
				o.LogFormat = val.Value
			}
			continue
		}
		kept = append(kept, key, val)
	}
	m.Content = kept
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(m); err != nil {
		return fmt.Errorf("%s: %w", origin, err)
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", origin, err)
	}
	return nil
}

// overrideDoc turns a dotted key and a value into a nested YAML document. The
// value is read as YAML, so numbers, booleans, lists ([a, b]) and maps work; a
// value that is not valid YAML is taken as a plain string.
func overrideDoc(key, value string) ([]byte, error) {
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("empty path component in %q", key)
		}
	}
	var v any
	if err := yaml.Unmarshal([]byte(value), &v); err != nil || value == "" {
		v = value // not YAML, or key= (an empty string, not "leave unchanged")
	}
	var node any = v
	for i := len(parts) - 1; i >= 0; i-- {
		node = map[string]any{parts[i]: node}
	}
	return yaml.Marshal(node)
}

// WriteHelp prints the usage text, cli's own options and the binary's full
// configuration with its defaults, which is the reference of every key.
func WriteHelp(w io.Writer, app App, cfg any) error {
	fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(app.Usage))
	fmt.Fprintf(w, `Options:
  --config FILE        read configuration from a YAML file (keys as below)
  key.path=value       override one key (applied after the file, in order),
                       e.g. econfig.domain=airline or kafka.brokers=[a:9092,b:9092]
  --metrics-addr ADDR  serve /metrics and /healthz on ADDR (default %q; "off" disables)
  --log-level LEVEL    debug, info, warn or error (default info)
  --log-format FORMAT  text or json (default text)
  --print-config       print the effective configuration and exit
  -h, --help           show this help

Configuration keys and their defaults:
`, orDefault(app.MetricsAddr, "off"))
	var buf bytes.Buffer
	if err := WriteConfig(&buf, cfg); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	return nil
}

// WriteConfig prints cfg as YAML with every secret redacted: the value of each secret-named key
// (api_key, password, token, …; see redact.IsSecretKey) and any credential lib/redact recognises
// in other values (a key pasted into a URL, a header in extra request fields). --print-config
// output is pasted into tickets and chats.
func WriteConfig(w io.Writer, cfg any) error {
	var doc yaml.Node
	if err := doc.Encode(cfg); err != nil {
		return fmt.Errorf("config: encode: %w", err)
	}
	redactNode(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("config: encode: %w", err)
	}
	return enc.Close()
}

// redactNode masks secrets in an encoded configuration, in place.
func redactNode(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Value != "" && v.Tag != "!!null" && redact.IsSecretKey(k.Value) {
				v.Value, v.Tag, v.Style = redact.Mask, "!!str", 0
				continue
			}
			redactNode(v)
		}
	case yaml.ScalarNode:
		if r := redact.String(n.Value); r != n.Value {
			n.Value, n.Style = r, yaml.DoubleQuotedStyle
		}
	default:
		for _, c := range n.Content {
			redactNode(c)
		}
	}
}
