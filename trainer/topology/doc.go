// Package topology opens the trainer's model backend where it runs: on one device, as
// data-parallel ranks on one host (one goroutine per GPU, joined by the backend's collectives,
// gpu/dp), or as one host's block of ranks in a world spanning several hosts (host 0, the leader,
// accepts the followers on the step feed, trainer/feed, and sends them the checkpoint to resume
// from and the collective's unique id). In every case it resumes from the newest readable
// checkpoint, optimizer state included, or starts from a Hugging Face model or a random
// initialisation. The backends come from gpu/backends by name; the rank layout (which global
// ranks a host holds, which device each local rank drives) is decided here, once, for
// tau2-trainer and tau2-trainer sft alike (docs/MULTIGPU.md).
package topology
