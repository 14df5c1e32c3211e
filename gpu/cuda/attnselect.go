//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import "fmt"

// hopperAvailable reports whether the calling thread's device runs the wgmma kernels of
// csrc/attention_sm90.cu: compute capability 9.x and a kernel library built for sm_90a (the
// Makefile's default GPU_ARCH). The caller holds its OS thread on the device (after t2_init).
func hopperAvailable() (bool, error) {
	var ok C.int
	if err := statusErr(C.t2_attention_sm90_available(&ok)); err != nil {
		return false, fmt.Errorf("cuda: probe the Hopper attention kernels: %w", err)
	}
	return ok != 0, nil
}

// resolveAttention turns an Options.Attention value into the kernels this device runs: "auto" and
// "" pick "hopper" where hopperAvailable and "fa2" elsewhere; "hopper" on a device without it is an
// error that says what is missing; every other (validated) value is kept.
func resolveAttention(name string) (string, error) {
	if name != "" && name != AttentionAuto && name != AttentionHopper {
		return name, nil
	}
	ok, err := hopperAvailable()
	if err != nil {
		return "", err
	}
	switch {
	case ok:
		return AttentionHopper, nil
	case name == AttentionHopper:
		return "", fmt.Errorf("cuda: attention %q needs a compute capability 9.x GPU (H100, H200) and kernels built "+
			"for sm_90a (GPU_ARCH='-gencode arch=compute_90a,code=sm_90a', the Makefile's default); use %q here",
			AttentionHopper, AttentionFA2)
	}
	return AttentionFA2, nil
}
