//go:build !cuda

package backends

// Without the cuda tag, backend=cuda is an error that says how to get it, not an unknown name.
func init() {
	RegisterMissing("cuda", "this binary was built without CUDA; build it with -tags cuda (make gpu-trainer, make gpu-sampler)")
}
