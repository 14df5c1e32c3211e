package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"tau2rl/lib/inference/llmtest"
)

// TestMultiReloaderReportsEachEndpoint: the trainer publishes weights to every sampler at once
// (MultiReloader); a server that refuses the checkpoint is reported by name, with its own error,
// and does not keep the others from loading it.
func TestMultiReloaderReportsEachEndpoint(t *testing.T) {
	const n = 5
	servers := make([]*llmtest.Server, n)
	var multi MultiReloader
	for i := range n {
		servers[i] = server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
		ep := fastEndpoint(t, servers[i].URL, nil, func(c *EndpointConfig) { c.Name = fmt.Sprintf("sampler-%d", i) })
		multi = append(multi, NewSGLangReloader(ep, SGLangReloadOptions{}))
	}
	servers[1].FailNext(10, 400)
	servers[3].FailNext(10, 422)
	err := multi.LoadWeights(context.Background(), "/ckpt/12", 12)
	if err == nil || !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v, want the rejections", err)
	}
	for _, name := range []string{"sampler-1", "sampler-3"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	for _, i := range []int{0, 2, 4} {
		if strings.Contains(err.Error(), fmt.Sprintf("sampler-%d", i)) {
			t.Errorf("error names healthy sampler-%d: %v", i, err)
		}
		if got := servers[i].ModelPath(); got != "/ckpt/12" {
			t.Errorf("sampler-%d serves %q, want /ckpt/12", i, got)
		}
	}
}
