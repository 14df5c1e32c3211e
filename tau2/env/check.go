package env

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"tau2rl/tau2/pyjson"
)

// CheckSchemas compares a domain's toolkits with τ²'s rendering in
// <dataDir>/derived/tool_schemas.json: the schema list (byte-identical in
// json.dumps form and order), each tool's type and mutates flag. user may be
// nil for domains without user tools. Domain tests call it; it returns all
// differences joined.
func CheckSchemas(dataDir, domain string, agent, user *Toolkit) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "derived", "tool_schemas.json"))
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	all, err := pyjson.LoadsObject(string(b))
	if err != nil {
		return fmt.Errorf("env: tool_schemas.json: %w", err)
	}
	dv, ok := all.Get(domain)
	d, isObj := dv.(*pyjson.Object)
	if !ok || !isObj {
		return fmt.Errorf("env: tool_schemas.json has no domain %q", domain)
	}
	var errs []error
	for _, side := range []struct {
		prefix string
		tk     *Toolkit
	}{{"agent", agent}, {"user", user}} {
		lv, ok := d.Get(side.prefix + "_tools")
		if !ok {
			if side.tk != nil {
				errs = append(errs, fmt.Errorf("%s: τ² has no %s tools", domain, side.prefix))
			}
			continue
		}
		if side.tk == nil {
			errs = append(errs, fmt.Errorf("%s: %s tools missing", domain, side.prefix))
			continue
		}
		want, err := pyjson.Dumps(lv)
		if err != nil {
			return err
		}
		if got := side.tk.SchemasJSON(); got != want {
			errs = append(errs, fmt.Errorf("%s %s schemas differ:\n got %s\nwant %s", domain, side.prefix, got, want))
		}
		types, _ := d.Get(side.prefix + "_tool_types")
		mut, _ := d.Get(side.prefix + "_tool_mutates_state")
		to, _ := types.(*pyjson.Object)
		mo, _ := mut.(*pyjson.Object)
		for _, tool := range side.tk.Tools() {
			ty, _ := to.Get(tool.Name)
			m, _ := mo.Get(tool.Name)
			if ty != string(tool.Type) || m != tool.Mutates {
				errs = append(errs, fmt.Errorf("%s %s: type %v mutates %v, want %v %v", domain, tool.Name, tool.Type, tool.Mutates, ty, m))
			}
		}
	}
	return errors.Join(errs...)
}
