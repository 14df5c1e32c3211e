package loss

// The built-in objectives, registered in this one place. A new objective is a file in this
// package (its Objective and Factory) and one line here; trainer/step, trainer/feed and the
// configuration need no change: `actor.objective: <name>` selects it, and the settings reach the
// hosts of a multi-host trainer inside the step's loss Config.
func init() {
	Register(ObjectivePPO, newPPO)
	Register(ObjectiveNLL, newNLL)
}

// ppo is AReaL's decoupled PPO actor loss (Config.Compute) as an Objective.
type ppo struct{ c Config }

func newPPO(c Config) (Objective, error) {
	if err := c.validatePPO(); err != nil {
		return nil, err
	}
	return ppo{c}, nil
}

func (ppo) Name() string { return ObjectivePPO }

func (p ppo) Compute(in Input) (Result, error) {
	var r Result
	l, d, err := p.c.Compute(in.MB, in.Seqs, in.Logp, in.Prox, in.Entropy, in.N, &r.Stats)
	if err != nil {
		return Result{}, err
	}
	r.Loss, r.DLogp = l, d
	return r, nil
}

// nll is the supervised negative log-likelihood (NLL) as an Objective. It reads no settings,
// advantages, behaviour or proximal log-probs; Stats.Tokens counts the references it scored.
type nll struct{}

func newNLL(Config) (Objective, error) { return nll{}, nil }

func (nll) Name() string { return ObjectiveNLL }

func (nll) Compute(in Input) (Result, error) {
	l, d, n, err := NLL(in.MB, in.Logp, in.N)
	if err != nil {
		return Result{}, err
	}
	return Result{Loss: l, DLogp: d, Stats: Stats{Tokens: n, Loss: l}}, nil
}
