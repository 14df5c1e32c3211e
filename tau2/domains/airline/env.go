package airline

import (
	"fmt"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
)

// Base is the airline data loaded once per process and data directory:
// the immutable FlightDB every environment forks, and the policy.
type Base struct {
	DB     *FlightDB
	Policy string
}

// LoadBase loads (once per process) the airline DB and policy of a data
// directory.
func LoadBase(dataDir string) (*Base, error) {
	return env.LoadOnce("airline:"+dataDir, func() (*Base, error) {
		raw, err := data.ReadFile(dataDir, "airline", "db.json")
		if err != nil {
			return nil, fmt.Errorf("airline: %w", err)
		}
		db, err := ParseDB([]byte(raw))
		if err != nil {
			return nil, err
		}
		policy, err := data.Policy(dataDir, "airline", false)
		if err != nil {
			return nil, fmt.Errorf("airline: %w", err)
		}
		return &Base{DB: db, Policy: policy}, nil
	})
}

// NewEnvironment returns an environment over a fork of db (for tests and
// tools that bring their own DB).
func NewEnvironment(db *FlightDB, policy string) *env.Environment {
	return &env.Environment{
		Domain: "airline",
		Policy: policy,
		Agent:  env.Side{Toolkit: Toolkit, DB: db.Fork()},
	}
}

// New builds a fresh airline environment (τ²'s airline get_environment);
// solo mode is not supported, as in τ².
func New(opts env.Options) (*env.Environment, error) {
	if opts.Solo {
		return nil, fmt.Errorf("Airline domain does not support solo mode")
	}
	dir, err := data.Dir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	b, err := LoadBase(dir)
	if err != nil {
		return nil, err
	}
	return NewEnvironment(b.DB, b.Policy), nil
}

func init() { env.Register("airline", New) }
