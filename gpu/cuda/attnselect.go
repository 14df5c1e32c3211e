//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// hopperProbed caches hopperAvailable's answer per device ordinal: it cannot change within a
// process, and the probe allocates, launches a kernel and synchronizes the device.
var hopperProbed struct {
	sync.Mutex
	ok map[int]bool
}

// hopperAvailable reports whether device dev runs the wgmma kernels of csrc/attention_sm90_*.cu:
// compute capability 9.x and a kernel library built for sm_90a (the Makefile's default GPU_ARCH).
// The caller holds its OS thread on dev (after t2_init or t2_set_device); dev names the cache
// entry, the probe itself runs on the thread's current device.
func hopperAvailable(dev int) (bool, error) {
	hopperProbed.Lock()
	defer hopperProbed.Unlock()
	if ok, seen := hopperProbed.ok[dev]; seen {
		return ok, nil
	}
	var ok C.int
	if err := statusErr(C.t2_attention_sm90_available(&ok)); err != nil {
		return false, fmt.Errorf("cuda: probe the Hopper attention kernels: %w", err)
	}
	if hopperProbed.ok == nil {
		hopperProbed.ok = map[int]bool{}
	}
	hopperProbed.ok[dev] = ok != 0
	return ok != 0, nil
}

// resolveAttention turns an Options.Attention value into the kernels device dev runs: "auto" and
// "" pick "hopper" where hopperAvailable and "fa2" elsewhere; "hopper" on a device without it is an
// error that says what is missing; every other (validated) value is kept.
func resolveAttention(name string, dev int) (string, error) {
	if name != "" && name != AttentionAuto && name != AttentionHopper {
		return name, nil
	}
	ok, err := hopperAvailable(dev)
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
