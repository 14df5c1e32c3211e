// Package domains is the one list of τ² domains tau2rl knows. Importing it
// (for its side effect) registers every domain with tau2/env's registry, so a
// binary, the episode runner and the evaluator's tests all see the same set.
//
// A new domain is one folder under tau2/domains/ whose init calls
// env.Register, plus one line below.
package domains

import (
	"slices"

	"tau2rl/tau2/env"

	_ "tau2rl/tau2/domains/airline"
	_ "tau2rl/tau2/domains/banking_knowledge"
	_ "tau2rl/tau2/domains/mock"
	_ "tau2rl/tau2/domains/retail"
	_ "tau2rl/tau2/domains/telecom"
)

// Names lists the registered domains, sorted.
func Names() []string {
	n := env.Domains()
	slices.Sort(n)
	return n
}
