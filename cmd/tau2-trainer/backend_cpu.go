package main

import (
	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// The pure-Go reference backend is always available.
func init() {
	backends["cpu"] = backendFactory{
		load:   func(dir string, _ *Config) (gpu.Backend, error) { return cpu.Load(dir) },
		random: func(mc gpu.Config, seed uint64, _ *Config) (gpu.Backend, error) { return cpu.NewRandom(mc, seed) },
		comms:  localComms,
		// Several hosts: a TCP hub in the leader's process (small models, tests).
		commID:    serveHub,
		hostComms: hubComms,
	}
}
