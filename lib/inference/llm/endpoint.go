package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"tau2rl/lib/redact"
)

// EndpointConfig configures one inference server (one base URL).
type EndpointConfig struct {
	// BaseURL is the server root, e.g. http://10.0.0.5:30000 (SGLang) or
	// http://host:8000/v1 (OpenAI-compatible chat; the /v1 is part of it).
	BaseURL string `yaml:"base_url"`
	// Name labels metrics and errors; default: the URL's host.
	Name string `yaml:"name"`
	// APIKey is sent as "Authorization: Bearer …" when set. Prefer APIKeyEnv or
	// APIKeyFile in production: a key in a config file or on a command line
	// leaks into process listings, shell history and config backups.
	APIKey string `yaml:"api_key"`
	// APIKeyEnv names an environment variable holding the key (e.g.
	// OPENAI_API_KEY, set from a systemd EnvironmentFile=).
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKeyFile is a file holding the key (e.g. a systemd credential,
	// $CREDENTIALS_DIRECTORY/openai); surrounding whitespace is trimmed.
	APIKeyFile string `yaml:"api_key_file"`
	// MaxConcurrency bounds in-flight calls to this endpoint (default 256).
	MaxConcurrency int `yaml:"max_concurrency"`
	// RequestTimeout bounds one HTTP attempt (default 10m: long generations).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MaxRetries is how many times a retryable failure (connection error,
	// timeout, 429, 5xx) is retried (default 3; 0 = no retries).
	MaxRetries int `yaml:"max_retries"`
	// BackoffBase and BackoffMax shape the exponential backoff with full
	// jitter: attempt n waits a uniform time in [0, min(max, base·2^n)]
	// (defaults 250ms and 10s). A Retry-After header is honoured up to
	// BackoffMax.
	BackoffBase time.Duration `yaml:"backoff_base"`
	BackoffMax  time.Duration `yaml:"backoff_max"`
}

// DefaultEndpointConfig returns the defaults documented on EndpointConfig.
func DefaultEndpointConfig() EndpointConfig {
	return EndpointConfig{
		MaxConcurrency: 256,
		RequestTimeout: 10 * time.Minute,
		MaxRetries:     3,
		BackoffBase:    250 * time.Millisecond,
		BackoffMax:     10 * time.Second,
	}
}

func (c EndpointConfig) withDefaults() EndpointConfig {
	d := DefaultEndpointConfig()
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = d.MaxConcurrency
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = d.BackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = d.BackoffMax
	}
	return c
}

// resolveAPIKey returns the key from api_key, api_key_env or api_key_file
// (at most one may be set). A named source that is empty is an error, so a
// missing secret fails at start-up instead of as 401s mid-run.
func (c EndpointConfig) resolveAPIKey() (string, error) {
	set := 0
	for _, v := range []string{c.APIKey, c.APIKeyEnv, c.APIKeyFile} {
		if v != "" {
			set++
		}
	}
	if set > 1 {
		return "", errors.New("set only one of api_key, api_key_env and api_key_file")
	}
	switch {
	case c.APIKeyEnv != "":
		k := strings.TrimSpace(os.Getenv(c.APIKeyEnv))
		if k == "" {
			return "", fmt.Errorf("api_key_env: environment variable %s is empty or unset", c.APIKeyEnv)
		}
		return k, nil
	case c.APIKeyFile != "":
		b, err := os.ReadFile(c.APIKeyFile)
		if err != nil {
			return "", fmt.Errorf("api_key_file: %w", err)
		}
		k := strings.TrimSpace(string(b))
		if k == "" {
			return "", fmt.Errorf("api_key_file: %s is empty", c.APIKeyFile)
		}
		return k, nil
	}
	return c.APIKey, nil
}

// sharedTransport is the process-wide connection pool: every endpoint
// reuses keep-alive connections from it. Idle connections per host are
// raised from Go's default of 2, which would otherwise make thousands of
// concurrent episodes open and close a connection per call.
var (
	transportOnce   sync.Once
	sharedTransport *http.Transport
)

// Transport returns the shared, tuned http.Transport used by all clients.
func Transport() *http.Transport {
	transportOnce.Do(func() {
		sharedTransport = &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   10 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			MaxIdleConns:          4096,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			ResponseHeaderTimeout: 0, // generations may take minutes; RequestTimeout bounds them
		}
	})
	return sharedTransport
}

// Endpoint is one server with its concurrency limit, retry policy and
// metrics. Clients for different APIs of the same server may share it (and
// so share its concurrency limit).
type Endpoint struct {
	cfg     EndpointConfig
	base    *url.URL
	name    string
	sem     chan struct{}
	client  *http.Client
	metrics *Metrics
	// sleep waits between retries; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// NewEndpoint validates cfg and builds an endpoint; m may be nil.
func NewEndpoint(cfg EndpointConfig, m *Metrics) (*Endpoint, error) {
	cfg = cfg.withDefaults()
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: base_url %q: want http(s)://host[:port][/path]", cfg.BaseURL)
	}
	name := cfg.Name
	if name == "" {
		name = u.Host
	}
	if cfg.APIKey, err = cfg.resolveAPIKey(); err != nil {
		return nil, fmt.Errorf("llm: endpoint %s: %w", name, err)
	}
	return &Endpoint{
		cfg:     cfg,
		base:    u,
		name:    name,
		sem:     make(chan struct{}, cfg.MaxConcurrency),
		client:  &http.Client{Transport: Transport()},
		metrics: m,
		sleep:   sleepCtx,
	}, nil
}

// Name is the endpoint's label in metrics and errors.
func (e *Endpoint) Name() string { return e.name }

// Metrics returns the endpoint's metrics (possibly nil).
func (e *Endpoint) Metrics() *Metrics { return e.metrics }

// URL joins path to the base URL.
func (e *Endpoint) URL(path string) string {
	return e.base.String() + "/" + strings.TrimLeft(path, "/")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxBody bounds a response body (a long completion with logprobs is a few
// MB at most).
const maxBody = 64 << 20

// response is a completed HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// Do sends body (JSON) to path with method, holding a concurrency slot for
// the whole call, retrying retryable failures with backoff. It returns the
// final 2xx response body or an *Error (4xx: ErrRejected; retries exhausted:
// ErrUnavailable; caller's context done: wraps ctx.Err()).
func (e *Endpoint) Do(ctx context.Context, op, method, path string, body []byte) ([]byte, error) {
	return e.DoCheck(ctx, op, method, path, body, nil)
}

// DoCheck is Do with a check of the 2xx body (typically decoding it): a
// check error makes the call fail with ErrBadResponse (not retried), and
// the metrics count it as a bad response rather than a success.
func (e *Endpoint) DoCheck(ctx context.Context, op, method, path string, body []byte, check func([]byte) error) ([]byte, error) {
	r, err := e.do(ctx, op, method, path, body, nil, check)
	if err != nil {
		return nil, err
	}
	return r.body, nil
}

// do is Do with extra request headers, returning the whole response.
func (e *Endpoint) do(ctx context.Context, op, method, path string, body []byte, header http.Header, check func([]byte) error) (*response, error) {
	start := time.Now()
	fail := func(outcome string, err error) (*response, error) {
		e.metrics.observe(e.name, op, outcome, time.Since(start).Seconds())
		return nil, err
	}
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return fail(OutcomeCanceled, &Error{Endpoint: e.name, Op: op, Err: fmt.Errorf("waiting for a concurrency slot: %w", ctx.Err())})
	}
	e.metrics.inflightAdd(e.name, 1)
	defer func() {
		<-e.sem
		e.metrics.inflightAdd(e.name, -1)
	}()

	url := e.URL(path)
	var last *Error
	for attempt := 0; ; attempt++ {
		r, reason, err := e.attempt(ctx, method, url, body, header)
		if err == nil && r.status/100 == 2 {
			if check != nil {
				if cerr := check(r.body); cerr != nil {
					return fail(OutcomeBadResponse, &Error{Endpoint: e.name, Op: op, Attempts: attempt + 1, Status: r.status,
						Kind: ErrBadResponse, Err: cerr, Body: snippet(r.body)})
				}
			}
			e.metrics.observe(e.name, op, OutcomeOK, time.Since(start).Seconds())
			return r, nil
		}
		if ctx.Err() != nil {
			return fail(OutcomeCanceled, &Error{Endpoint: e.name, Op: op, Attempts: attempt + 1, Err: ctx.Err()})
		}
		last = &Error{Endpoint: e.name, Op: op, Attempts: attempt + 1, Err: err}
		if r != nil {
			last.Status = r.status
			last.Body = snippet(r.body)
		}
		if reason == "" && r != nil && r.status/100 == 2 { // a 2xx body we cannot use
			last.Kind = ErrBadResponse
			return fail(OutcomeBadResponse, last)
		}
		if reason == "" { // not retryable: a 4xx other than 429
			last.Kind = ErrRejected
			return fail(OutcomeRejected, last)
		}
		if attempt >= e.cfg.MaxRetries {
			last.Kind = ErrUnavailable
			return fail(OutcomeUnavailable, last)
		}
		e.metrics.retry(e.name, op, reason)
		wait := e.backoff(attempt, r)
		if err := e.sleep(ctx, wait); err != nil {
			return fail(OutcomeCanceled, &Error{Endpoint: e.name, Op: op, Attempts: attempt + 1, Err: err, Status: last.Status})
		}
	}
}

// attempt makes one HTTP request. reason is the retry reason for a
// retryable failure, "" for success or a non-retryable status.
func (e *Endpoint) attempt(ctx context.Context, method, url string, body []byte, header http.Header) (*response, string, error) {
	actx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, "", fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if e.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIKey)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := e.client.Do(req)
	if err != nil {
		if errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, "timeout", fmt.Errorf("attempt timed out after %s: %w", e.cfg.RequestTimeout, err)
		}
		return nil, "connection", err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	r := &response{status: res.StatusCode, header: res.Header, body: data}
	if err != nil {
		if errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return r, "timeout", fmt.Errorf("reading body: attempt timed out after %s: %w", e.cfg.RequestTimeout, err)
		}
		return r, "body", fmt.Errorf("reading body: %w", err)
	}
	if len(data) > maxBody {
		return r, "", fmt.Errorf("response body larger than %d bytes", maxBody)
	}
	switch {
	case res.StatusCode/100 == 2:
		return r, "", nil
	case res.StatusCode == http.StatusTooManyRequests:
		return r, "status_429", fmt.Errorf("HTTP %d", res.StatusCode)
	case res.StatusCode == http.StatusNotImplemented:
		// Permanent: the server lacks the endpoint or feature (tau2-sampler's
		// /update_weights_from_ipc on a cpu backend); retrying cannot help.
		return r, "", fmt.Errorf("HTTP %d", res.StatusCode)
	case res.StatusCode >= 500:
		return r, "status_5xx", fmt.Errorf("HTTP %d", res.StatusCode)
	default:
		return r, "", fmt.Errorf("HTTP %d", res.StatusCode)
	}
}

// backoff is the wait before retry number attempt+1: full jitter over an
// exponentially growing window, or the server's Retry-After (seconds) when
// it asks for longer, both capped at BackoffMax.
func (e *Endpoint) backoff(attempt int, r *response) time.Duration {
	window := e.cfg.BackoffBase << min(attempt, 30)
	if window <= 0 || window > e.cfg.BackoffMax {
		window = e.cfg.BackoffMax
	}
	wait := time.Duration(rand.Int64N(int64(window) + 1))
	if r != nil {
		if s, err := strconv.Atoi(strings.TrimSpace(r.header.Get("Retry-After"))); err == nil && s > 0 {
			wait = max(wait, time.Duration(s)*time.Second)
		}
	}
	return min(wait, e.cfg.BackoffMax)
}

func snippet(b []byte) string {
	const n = 512
	// Redact before cutting, so a key that straddles the cut is still recognised whole.
	s := redact.String(strings.ToValidUTF8(string(b[:min(len(b), 8*n)]), "\uFFFD"))
	if len(s) > n || len(b) > 8*n {
		s = strings.ToValidUTF8(s[:min(len(s), n)], "") + "…"
	}
	return strings.TrimSpace(s)
}
