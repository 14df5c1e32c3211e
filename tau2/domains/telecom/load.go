package telecom

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"tau2rl/tau2/pyjson"
)

// File names inside τ²'s data/tau2/domains/telecom directory.
const (
	DBFile                      = "db.toml"
	UserDBFile                  = "user_db.toml"
	MainPolicyFile              = "main_policy.md"
	MainPolicySoloFile          = "main_policy_solo.md"
	TechSupportManualFile       = "tech_support_manual.md"
	TechSupportWorkflowFile     = "tech_support_workflow.md"
	TechSupportWorkflowSoloFile = "tech_support_workflow_solo.md"
)

// Data is the telecom domain loaded once per process: the pristine agent and
// user databases every environment starts from (each gets a deep copy).
type Data struct {
	DB     *DB
	UserDB *UserDB
}

// LoadDir loads db.toml and user_db.toml from a τ² telecom domain directory
// (…/tau2/domains/telecom).
func LoadDir(dir string) (*Data, error) {
	dbBytes, err := os.ReadFile(filepath.Join(dir, DBFile))
	if err != nil {
		return nil, fmt.Errorf("telecom: read db: %w", err)
	}
	userBytes, err := os.ReadFile(filepath.Join(dir, UserDBFile))
	if err != nil {
		return nil, fmt.Errorf("telecom: read user db: %w", err)
	}
	db, err := ParseDB(dbBytes)
	if err != nil {
		return nil, fmt.Errorf("telecom: %s: %w", filepath.Join(dir, DBFile), err)
	}
	udb, err := ParseUserDB(userBytes)
	if err != nil {
		return nil, fmt.Errorf("telecom: %s: %w", filepath.Join(dir, UserDBFile), err)
	}
	return &Data{DB: db, UserDB: udb}, nil
}

// ParseDB parses and validates the agent DB from TOML text (τ²'s
// TelecomDB.load: toml.load then model_validate).
func ParseDB(data []byte) (*DB, error) {
	v, err := parseTOML(data)
	if err != nil {
		return nil, err
	}
	return validateDB(v)
}

// ParseUserDB parses and validates the user DB from TOML text.
func ParseUserDB(data []byte) (*UserDB, error) {
	v, err := parseTOML(data)
	if err != nil {
		return nil, err
	}
	return validateUserDB(v)
}

// parseTOML decodes TOML into generic JSON-like values (*pyjson.Object with
// document key order, []any, string, int64, float64, bool). TOML dates and
// datetimes become ISO strings, which is what pydantic then parses.
func parseTOML(data []byte) (*pyjson.Object, error) {
	var raw map[string]any
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		return nil, fmt.Errorf("parse toml: %w", err)
	}
	// Document order of every key path (array-of-table indexes are not part
	// of a path, so all elements share the first-seen order).
	order := map[string]int{}
	for i, k := range md.Keys() {
		p := strings.Join(k, "\x00")
		if _, ok := order[p]; !ok {
			order[p] = i
		}
	}
	v, err := tomlValue(raw, "", order)
	if err != nil {
		return nil, err
	}
	return v.(*pyjson.Object), nil
}

func tomlValue(v any, path string, order map[string]int) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		prefix := path
		if prefix != "" {
			prefix += "\x00"
		}
		sort.SliceStable(keys, func(i, j int) bool {
			oi, iok := order[prefix+keys[i]]
			oj, jok := order[prefix+keys[j]]
			if iok != jok {
				return iok
			}
			if oi != oj {
				return oi < oj
			}
			return keys[i] < keys[j]
		})
		o := pyjson.NewObject()
		for _, k := range keys {
			cv, err := tomlValue(x[k], prefix+k, order)
			if err != nil {
				return nil, err
			}
			o.Set(k, cv)
		}
		return o, nil
	case []map[string]any:
		out := make([]any, len(x))
		for i, el := range x {
			cv, err := tomlValue(el, path, order)
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			cv, err := tomlValue(el, path, order)
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case string, bool, int64:
		return x, nil
	case float64:
		return x, nil
	case time.Time:
		return tomlTime(x), nil
	}
	return nil, fmt.Errorf("toml: unsupported value of type %T at %q", v, strings.ReplaceAll(path, "\x00", "."))
}

// tomlTime renders a TOML date/time as the ISO string Python's toml package
// would hand to pydantic (local dates as dates, others as datetimes).
func tomlTime(t time.Time) string {
	// The toml package marks local values with these zone names.
	switch t.Location().String() {
	case "date-local":
		return t.Format("2006-01-02")
	case "datetime-local":
		return t.Format("2006-01-02T15:04:05.999999")
	case "time-local":
		return t.Format("15:04:05.999999")
	}
	return t.Format("2006-01-02T15:04:05.999999Z07:00")
}
