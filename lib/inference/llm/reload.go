package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"tau2rl/lib/inference/protocol"
)

// Reloader makes an inference server serve new weights: the checkpoint
// directory path (HF safetensors), to be reported as weight version version.
type Reloader interface {
	LoadWeights(ctx context.Context, path string, version int64) error
}

// VersionString is how a policy version is named on the servers
// (weight_version), and parsed back from GenerateResult.WeightVersion.
func VersionString(version int64) string { return strconv.FormatInt(version, 10) }

// SGLangReloadOptions are the optional fields of /update_weights_from_disk.
type SGLangReloadOptions struct {
	// AbortAllRequests aborts in-flight generations instead of waiting for
	// them (they finish with FinishAbort).
	AbortAllRequests bool `yaml:"abort_all_requests"`
	// KeepCache disables flush_cache (the radix cache then keeps entries
	// computed with the old weights).
	KeepCache bool `yaml:"keep_cache"`
	// LoadFormat overrides the server's load_format ("" = server default).
	LoadFormat string `yaml:"load_format"`
}

// SGLangReloader calls SGLang's POST /update_weights_from_disk
// (docs/INFERENCE.md §2) with weight_version set, so that later
// /generate answers report the new version in meta_info.weight_version.
type SGLangReloader struct {
	ep   *Endpoint
	opts SGLangReloadOptions
}

// NewSGLangReloader returns a reloader for the SGLang server at ep.
func NewSGLangReloader(ep *Endpoint, opts SGLangReloadOptions) *SGLangReloader {
	return &SGLangReloader{ep: ep, opts: opts}
}

// LoadWeights implements Reloader.
func (r *SGLangReloader) LoadWeights(ctx context.Context, path string, version int64) error {
	const op = "update_weights"
	if path == "" {
		return &Error{Endpoint: r.ep.name, Op: op, Kind: ErrRejected, Err: errors.New("empty checkpoint path")}
	}
	req := protocol.UpdateWeightsFromDiskRequest{ModelPath: path, AbortAllRequests: r.opts.AbortAllRequests,
		WeightVersion: ptr(VersionString(version)), FlushCache: ptr(!r.opts.KeepCache)}
	if r.opts.LoadFormat != "" {
		req.LoadFormat = &r.opts.LoadFormat
	}
	body, _ := json.Marshal(req) // always encodes
	return postUpdate(ctx, r.ep, op, "/update_weights_from_disk", body)
}

// postUpdate sends body to one of SGLang's weight endpoints (from disk, tau2rl's from IPC, the
// weight-sync group's) and reads their common {success, message} answer: success false is
// ErrRejected with the server's message.
func postUpdate(ctx context.Context, ep *Endpoint, op, path string, body []byte) error {
	var res protocol.UpdateWeightsResponse
	if _, err := ep.DoCheck(ctx, op, http.MethodPost, path, body, func(data []byte) error {
		if err := json.Unmarshal(data, &res); err != nil {
			return fmt.Errorf("decode response: %w", err)
		}
		if res.Success == nil {
			return fmt.Errorf("response has no success field")
		}
		return nil
	}); err != nil {
		return err
	}
	if !*res.Success {
		return &Error{Endpoint: ep.name, Op: op, Kind: ErrRejected, Err: fmt.Errorf("server: %s", res.Message)}
	}
	return nil
}

// modelInfo reads a server's GET /model_info (SGLang's, with tau2-sampler's additive gpu_uuid
// and weight_sync), which the reload modes ask to choose a path; on error, why says which step
// failed, for the choice's log line.
func modelInfo(ctx context.Context, ep *Endpoint) (info protocol.ModelInfo, why string, err error) {
	data, err := ep.Do(ctx, "model_info", http.MethodGet, "/model_info", nil)
	if err != nil {
		return info, "GET /model_info failed", err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, "GET /model_info is not SGLang's model info", err
	}
	return info, "", nil
}

// VLLMReloader reloads a vLLM server from a shared-disk checkpoint with the
// RL weight-transfer endpoints (docs/INFERENCE.md §4): /pause?mode=wait,
// /start_weight_update, /update_weights {"update_info": {"path": …}},
// /finish_weight_update {"weight_version": …}, /resume. They exist only with
// VLLM_SERVER_DEV_MODE=1 and a build with the disk weight-transfer backend;
// elsewhere the first call fails with ErrRejected (404).
type VLLMReloader struct{ ep *Endpoint }

// NewVLLMReloader returns a reloader for the vLLM server at ep.
func NewVLLMReloader(ep *Endpoint) *VLLMReloader { return &VLLMReloader{ep: ep} }

// LoadWeights implements Reloader. The server is resumed even when a step
// after the pause fails.
func (r *VLLMReloader) LoadWeights(ctx context.Context, path string, version int64) (err error) {
	const op = "update_weights"
	if path == "" {
		return &Error{Endpoint: r.ep.name, Op: op, Kind: ErrRejected, Err: errors.New("empty checkpoint path")}
	}
	post := func(p string, body any) error {
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		_, err := r.ep.Do(ctx, op, http.MethodPost, p, b)
		return err
	}
	if err := post("/pause?mode=wait", nil); err != nil {
		return err
	}
	defer func() {
		if rerr := post("/resume", nil); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume after weight update: %w", rerr))
		}
	}()
	if err := post("/start_weight_update", nil); err != nil {
		return err
	}
	if err := post("/update_weights", protocol.NewVLLMUpdateWeights(path)); err != nil {
		return err
	}
	return post("/finish_weight_update", protocol.FinishWeightUpdateRequest{WeightVersion: ptr(VersionString(version))})
}

// WeightLoad is one call recorded by NopReloader.
type WeightLoad struct {
	Path    string
	Version int64
}

// NopReloader loads nothing and records the calls, for tests and for
// servers whose weights never change (a hosted API, the scripted server).
type NopReloader struct {
	mu    sync.Mutex
	loads []WeightLoad
}

// LoadWeights implements Reloader.
func (r *NopReloader) LoadWeights(ctx context.Context, path string, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loads = append(r.loads, WeightLoad{Path: path, Version: version})
	return nil
}

// Loads returns the recorded calls.
func (r *NopReloader) Loads() []WeightLoad {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]WeightLoad(nil), r.loads...)
}

// MultiReloader reloads every server of a data-parallel policy, in
// parallel, and fails if any fails.
type MultiReloader []Reloader

// LoadWeights implements Reloader.
func (m MultiReloader) LoadWeights(ctx context.Context, path string, version int64) error {
	errs := make([]error, len(m))
	var wg sync.WaitGroup
	for i, r := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.LoadWeights(ctx, path, version)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
