// Package cli is the process glue shared by every tau2rl binary: argument parsing
// (--help, --config FILE.yaml and key=value overrides on dotted YAML paths, as
// AReaL's users type them), structured logging, a signal-aware context, the
// Prometheus /metrics and /healthz server, and systemd readiness and watchdog
// notifications. It keeps the mains in cmd/ thin: each one declares its
// configuration struct with its defaults and hands the work to its package.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"

	"tau2rl/lib/assets"
	"tau2rl/lib/redact"
	"tau2rl/lib/required"
)

// App describes a binary for --help and for its defaults.
type App struct {
	// Name is the binary's name, used in messages and as the slog "app" attribute.
	Name string
	// Usage is the multi-line help text printed by --help above the option list.
	Usage string
	// MetricsAddr is the default listen address of /metrics and /healthz
	// ("" or "off" disables the server).
	MetricsAddr string
}

// Runtime is what a running binary gets from cli.
type Runtime struct {
	// Registry is where the binary registers its metrics; it already holds the
	// Go and process collectors and is served on /metrics.
	Registry *prometheus.Registry
	// Log is the process logger.
	Log *slog.Logger
	// Ready marks the process ready: /healthz turns 200 and systemd gets
	// READY=1. Call it once the binary has connected and started its work.
	Ready func()
	// MetricsAddr is the address the metrics server actually listens on
	// (useful when ":0" was asked for), or "" when disabled.
	MetricsAddr string
}

// Main runs the binary with os.Args[1:]. See MainArgs.
func Main(app App, cfg any, run func(ctx context.Context, rt *Runtime) error) {
	MainArgs(app, os.Args[1:], cfg, run)
}

// MainArgs parses args into cfg, prepares the runtime and calls run. It never
// returns: it exits 0 on success, 2 on a usage error and 1 on any other error,
// printing the error to stderr.
func MainArgs(app App, args []string, cfg any, run func(ctx context.Context, rt *Runtime) error) {
	err := Execute(context.Background(), app, args, cfg, os.Stdout, run)
	code := ExitCode(err)
	switch code {
	case 0:
	case 2:
		fmt.Fprintf(os.Stderr, "%s: %s\nRun '%s --help' for the options.\n", app.Name, errorText(app.Name, err), app.Name)
	default:
		fmt.Fprintf(os.Stderr, "%s: %s\n", app.Name, errorText(app.Name, err))
	}
	os.Exit(code)
}

// errorText is err's message as printed after the program's name: a sub-command's packages
// name their operation ("grade: open x.json: …"), and printed after "tau2-eval grade: " that
// word would appear twice, so a leading "<sub-command>: " is dropped once.
func errorText(name string, err error) string {
	msg := err.Error()
	if i := strings.LastIndexByte(name, ' '); i >= 0 {
		msg = strings.TrimPrefix(msg, name[i+1:]+": ")
	}
	return msg
}

// ExitCode is the process exit status for Execute's result: 0 for success (and --help), 2 for a
// usage or configuration error (ErrUsage: bad arguments, a bad --config file, a value that fails
// validation), 1 for anything else. systemd units stop restarting on 2
// (RestartPreventExitStatus=2): a typo in a config does not get better by retrying.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	default:
		return 1
	}
}

// Validator is implemented by configurations that check their values. Execute calls Validate
// after parsing and before the binary's run function, so a bad value is a usage error (exit 2)
// reported before any connection is made, and --print-config reports it too.
type Validator interface {
	Validate() error
}

// Usage marks err as a usage or configuration error (exit status 2); nil stays nil.
func Usage(err error) error {
	if err == nil || errors.Is(err, ErrUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUsage, err)
}

var errHelp = errors.New("help shown")

// Execute is MainArgs without the exit: it returns run's error (or a usage
// error). Tests and multi-command mains use it directly. Help text goes to out.
func Execute(parent context.Context, app App, args []string, cfg any, out io.Writer, run func(ctx context.Context, rt *Runtime) error) error {
	opts, err := Parse(args, cfg)
	if err != nil {
		return err
	}
	if opts.Help {
		if err := WriteHelp(out, app, cfg); err != nil {
			return err
		}
		return errHelp
	}
	if opts.PrintConfig {
		return printConfig(out, app, opts, cfg)
	}
	if v, ok := cfg.(Validator); ok {
		if err := v.Validate(); err != nil {
			return Usage(fmt.Errorf("invalid configuration: %w", err))
		}
	}
	addr := app.MetricsAddr
	if opts.MetricsAddr != nil {
		addr = *opts.MetricsAddr
	}
	log, err := NewLogger(os.Stderr, opts.LogLevel, opts.LogFormat)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	log = log.With("app", app.Name)
	slog.SetDefault(log)

	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var ready atomic.Bool
	rt := &Runtime{Registry: reg, Log: log}
	rt.Ready = func() {
		if ready.CompareAndSwap(false, true) {
			log.Info("ready")
			_ = Notify("READY=1")
		}
	}
	if addr != "" && addr != "off" {
		srv, bound, err := serveMetrics(addr, reg, &ready, ctx)
		if err != nil {
			return err
		}
		rt.MetricsAddr = bound
		log.Info("serving metrics", "addr", bound)
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	// The watchdog keeps pinging through a graceful shutdown (a trainer may be finishing a long
	// step), and systemd hears STOPPING=1 as soon as the signal arrives.
	stopWatchdog := startWatchdog(context.Background())
	defer stopWatchdog()
	var stopping sync.Once
	notifyStopping := func() { stopping.Do(func() { _ = Notify("STOPPING=1") }) }
	go func() {
		<-ctx.Done()
		if parent.Err() == nil { // a signal, not the caller's cancellation
			notifyStopping()
		}
	}()

	err = run(ctx, rt)
	notifyStopping()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// A signal asked us to stop and the work ended because of it: a clean shutdown.
		log.Info("stopped on signal")
		return nil
	}
	return err
}

// Annotator is implemented by configurations whose effective values are found at run time rather
// than written in the configuration — where the τ² data and the Qwen3 tokenizer resolve
// (lib/assets.Describe) —: --print-config prints each note as a comment after the configuration,
// so a user sees what the binary would use before it runs.
type Annotator interface {
	ConfigNotes() []string
}

// printConfig is --print-config: the effective configuration as YAML, the Annotator's notes, then
// validation. A configuration that only lacks required keys (every validation error wraps
// required.ErrMissing) is printed with those keys listed as comments, and the status is 0: a first
// `BINARY --print-config` shows the defaults and what is left to set. A wrong value is still a
// usage error (exit status 2), so --print-config checks a configuration file too. The output stays
// valid YAML (comments only), so it can be saved and passed back with --config.
func printConfig(out io.Writer, app App, opts Options, cfg any) error {
	if err := WriteConfig(out, cfg); err != nil {
		return err
	}
	if err := writeProcessKeys(out, app, opts); err != nil {
		return err
	}
	if a, ok := cfg.(Annotator); ok {
		if notes := a.ConfigNotes(); len(notes) > 0 {
			fmt.Fprintln(out, "# found at run time:")
			for _, n := range notes {
				fmt.Fprintf(out, "#   %s\n", redact.String(n))
			}
		}
	}
	v, ok := cfg.(Validator)
	if !ok {
		return nil
	}
	err := v.Validate()
	if err == nil {
		return nil
	}
	if !required.Only(err) {
		return Usage(fmt.Errorf("invalid configuration: %w", err))
	}
	fmt.Fprintln(out, "# still to set before it runs:")
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(out, "#   %s\n", line)
	}
	return nil
}

// writeProcessKeys prints the keys cli takes for itself (reservedKeys) with their effective
// values — the binary's default, else the --config file's, key=value's or the flag's — after the
// binary's own configuration: they are part of the effective configuration (the one-host layouts
// set each sampler's metrics port in its YAML), and the printed file loads back to the same.
func writeProcessKeys(out io.Writer, app App, opts Options) error {
	keys := struct {
		MetricsAddr string `yaml:"metrics_addr"`
		LogLevel    string `yaml:"log_level"`
		LogFormat   string `yaml:"log_format"`
	}{app.MetricsAddr, orDefault(opts.LogLevel, "info"), orDefault(opts.LogFormat, "text")}
	if opts.MetricsAddr != nil {
		keys.MetricsAddr = *opts.MetricsAddr
	}
	if keys.MetricsAddr == "" {
		keys.MetricsAddr = "off"
	}
	fmt.Fprintln(out, "# the process's own keys (also --metrics-addr, --log-level, --log-format):")
	enc := yaml.NewEncoder(out)
	if err := enc.Encode(keys); err != nil {
		return fmt.Errorf("config: encode: %w", err)
	}
	return enc.Close()
}

// Check parses args into cfg and validates it as Execute does before calling a binary's run
// function (a usage error, exit status 2, for anything wrong, missing keys included), without
// starting anything. Tests of the binaries' example configurations use it.
func Check(args []string, cfg any) error {
	if _, err := Parse(args, cfg); err != nil {
		return err
	}
	if v, ok := cfg.(Validator); ok {
		if err := v.Validate(); err != nil {
			return Usage(fmt.Errorf("invalid configuration: %w", err))
		}
	}
	return nil
}

// serveMetrics starts the /metrics and /healthz server. /healthz answers 503
// until the binary calls Ready, 200 while it runs, and 503 again once the
// process is shutting down, so load balancers and systemd probes see the truth.
func serveMetrics(addr string, reg *prometheus.Registry, ready *atomic.Bool, ctx context.Context) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case ctx.Err() != nil:
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case !ready.Load():
			http.Error(w, "starting", http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, "ok\n")
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}

// NewLogger builds the process logger: level debug|info|warn|error, format
// text (for terminals and journald) or json (for log shippers).
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(orDefault(level, "info")))); err != nil {
		return nil, fmt.Errorf("log_level %q: want debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: lv, ReplaceAttr: redactAttr}
	switch orDefault(format, "text") {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	default:
		return nil, fmt.Errorf("log_format %q: want text or json", format)
	}
}

// redactAttr passes every logged string and error through lib/redact: log lines carry upstream
// error bodies and URLs, which may quote an API key or a password.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); redact.String(s) != s {
			a.Value = slog.StringValue(redact.String(s))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			if s := err.Error(); redact.String(s) != s {
				a.Value = slog.StringValue(redact.String(s))
			}
		}
	}
	return a
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// DataNote is the Annotator note of a binary that reads the τ² data: where its key (data_dir;
// dir its value, "" for lib/assets' order) resolves, without downloading.
func DataNote(key, dir string) string {
	return key + " → " + assets.Describe(assets.Tau2Data, dir)
}

// TokenizerNote is the Annotator note of a binary that reads Qwen3's tokenizer.json: the file its
// key names, or where lib/assets' order finds it when the key is empty.
func TokenizerNote(key, file string) string {
	if file != "" {
		return key + " → " + file + " (set)"
	}
	return key + " → " + assets.Describe(assets.Qwen3Tokenizer, "")
}
