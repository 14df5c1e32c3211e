package retail

import (
	"errors"
	"fmt"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
)

// Domain is the registry name of the retail domain.
const Domain = "retail"

// Base is the retail data loaded once per process and data directory: the
// immutable RetailDB every environment forks, and the policy.
type Base struct {
	DB     *RetailDB
	Policy string
}

// LoadBase loads (once per process) the retail DB and policy of a data
// directory.
func LoadBase(dataDir string) (*Base, error) {
	return env.LoadOnce("retail:"+dataDir, func() (*Base, error) {
		raw, err := data.ReadFile(dataDir, Domain, "db.json")
		if err != nil {
			return nil, fmt.Errorf("retail: %w", err)
		}
		db, err := ParseDB([]byte(raw))
		if err != nil {
			return nil, err
		}
		policy, err := data.Policy(dataDir, Domain, false)
		if err != nil {
			return nil, fmt.Errorf("retail: %w", err)
		}
		return &Base{DB: db, Policy: policy}, nil
	})
}

// NewEnvironment returns an environment over a fork of db (for tests and
// tools that bring their own DB).
func NewEnvironment(db *RetailDB, policy string) *env.Environment {
	return &env.Environment{
		Domain: Domain,
		Policy: policy,
		Agent:  env.Side{Toolkit: Toolkit, DB: db.Fork()},
	}
}

// New builds a fresh retail environment (τ²'s retail get_environment);
// solo mode is refused with τ²'s error, as retail tasks have no ticket.
func New(opts env.Options) (*env.Environment, error) {
	if opts.Solo {
		return nil, errors.New("Retail domain does not support solo mode")
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

func init() { env.Register(Domain, New) }
