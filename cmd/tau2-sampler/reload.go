package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu/sampler"
	trainckpt "tau2rl/trainer/checkpoint"
)

// Serving from the trainer's checkpoint directory (checkpoint_dir). Under systemd a sampler is
// restarted on its own (a crash, a host reboot, `systemctl restart tau2-sampler@1`) while the
// trainer keeps training: a sampler that came back on its configured `model` would serve the
// starting weights until the trainer's next checkpoint reloaded it, and every trajectory it
// sampled meanwhile would be many versions stale. With checkpoint_dir it starts on the newest
// complete checkpoint instead, and `systemctl reload` (ExecReload sends SIGHUP) swaps in the
// newest one without dropping a request, the same way the trainer's reload does.

// resolveStartCheckpoint points cfg at the newest complete checkpoint v<N> of cfg.CheckpointDir
// and sets the weight version reported before the first reload to N. An empty or missing
// directory leaves model as configured (the first run, before the trainer has saved anything).
func resolveStartCheckpoint(cfg *Config, log *slog.Logger) error {
	if cfg.CheckpointDir == "" {
		return nil
	}
	dir, st, ok, err := newestCheckpoint(cfg.CheckpointDir, log)
	if err != nil {
		return err
	}
	if !ok {
		log.Info("no checkpoint yet in checkpoint_dir; serving model", "checkpoint_dir", cfg.CheckpointDir, "model", cfg.Model)
		return nil
	}
	log.Info("serving the newest checkpoint of checkpoint_dir", "path", dir, "version", st.Version)
	cfg.Model = dir
	cfg.Engine.WeightVersion = strconv.FormatInt(st.Version, 10)
	return nil
}

// newestCheckpoint is trainckpt.Manager.Latest on dir: the same rule the trainer resumes by
// (a directory v<N> whose trainer_state.json is valid and says version N; half-written
// .tmp-v<N>-<pid> directories are never candidates). A missing directory holds none.
func newestCheckpoint(dir string, log *slog.Logger) (string, trainckpt.State, bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", trainckpt.State{}, false, nil
	}
	path, st, ok, skipped, err := (&trainckpt.Manager{Dir: dir}).Latest()
	for _, s := range skipped {
		log.Warn("skipping an unreadable checkpoint", "err", s)
	}
	if err != nil {
		return "", trainckpt.State{}, false, fmt.Errorf("sampler: checkpoint_dir %s: %w", dir, err)
	}
	return path, st, ok, nil
}

// reloadSignals catches SIGHUP from the start of run: without it the Go runtime's default
// action for SIGHUP ends the process, so a `systemctl reload` that raced the model load would
// kill the sampler. Signals that arrive before the server is up are handled once it is.
func reloadSignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}

// serveReloads answers each SIGHUP with a reload from checkpoint_dir until ctx ends. systemd
// hears RELOADING=1 while it runs and READY=1 after, whatever the outcome: a failed reload
// leaves the old weights serving (the journal says why), which is a running service, not a
// failed one.
func serveReloads(ctx context.Context, hup <-chan os.Signal, cfg *Config, api http.Handler, eng *sampler.Engine, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if cfg.CheckpointDir == "" {
			log.Warn("SIGHUP: no checkpoint_dir configured, nothing to reload from; the weights are unchanged")
			continue
		}
		_ = cli.Notify("RELOADING=1\nSTATUS=reloading weights from " + cfg.CheckpointDir)
		if err := reloadNewest(ctx, cfg.CheckpointDir, api, eng, log); err != nil {
			log.Error("SIGHUP reload failed; the old weights keep serving", "err", err)
			_ = cli.Notify("READY=1\nSTATUS=reload failed, serving weight version " + eng.Stats().Version)
			continue
		}
		_ = cli.Notify("READY=1\nSTATUS=serving weight version " + eng.Stats().Version)
	}
}

// reloadNewest swaps in the newest checkpoint of dir unless it is the version already served.
// It goes through the server's own POST /update_weights_from_disk handler, in process, so a
// reload by signal is checked against the served architecture, serialized with the trainer's
// reloads, and applied to requests in flight exactly like one the trainer sends over HTTP.
func reloadNewest(ctx context.Context, dir string, api http.Handler, eng *sampler.Engine, log *slog.Logger) error {
	path, st, ok, err := newestCheckpoint(dir, log)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sampler: no complete checkpoint in %s", dir)
	}
	version := strconv.FormatInt(st.Version, 10)
	if cur := eng.Stats().Version; cur == version {
		log.Info("SIGHUP: already serving the newest checkpoint", "path", path, "version", version)
		return nil
	}
	body, _ := json.Marshal(map[string]any{"model_path": path, "weight_version": version})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/update_weights_from_disk", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	var res struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		return fmt.Errorf("sampler: reload %s: HTTP %d: %s", path, rec.Code, bytes.TrimSpace(rec.Body.Bytes()))
	}
	if rec.Code != http.StatusOK || !res.Success {
		return fmt.Errorf("sampler: reload %s: %s", path, res.Message)
	}
	log.Info("SIGHUP: reloaded the newest checkpoint", "path", path, "version", version)
	return nil
}

// servingMetrics are the series the alerts on a GPU host need beside the engine's own:
// tau2rl_sampler_weight_version (the weight version served, as a number, to compare with the
// trainer's tau2rl_trainer_policy_version; -1 when the version is not an integer) and
// tau2rl_sampler_ready (1 from READY=1 until the drain starts). A series the engine already
// registers under the same name is kept and this one skipped.
func servingMetrics(reg prometheus.Registerer, eng *sampler.Engine, ready func() bool, log *slog.Logger) {
	version := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: "weight_version",
		Help: "Weight version served (the trainer's policy version it was saved at); -1 when not an integer."},
		func() float64 {
			v, err := strconv.ParseInt(eng.Stats().Version, 10, 64)
			if err != nil {
				return -1
			}
			return float64(v)
		})
	readyG := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: "ready",
		Help: "1 while the sampler serves (model loaded, API listening), 0 while it drains."},
		func() float64 {
			if ready() {
				return 1
			}
			return 0
		})
	for _, c := range []prometheus.Collector{version, readyG} {
		if err := reg.Register(c); err != nil {
			log.Warn("metric not registered (the engine exports it already?)", "err", err)
		}
	}
}
