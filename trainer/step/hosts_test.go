package step

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cpu"
	"tau2rl/gpu/dp"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
)

// twoHosts is a world of 4 in-process ranks split over two "hosts" of 2 ranks each, every rank a
// cpu backend of w: the leader's group drives global ranks 0 and 1, the follower's 2 and 3.
func twoHosts(t *testing.T, w *gpu.Weights) (leader, follower *dp.Group) {
	t.Helper()
	comms, err := collective.NewLocal(4)
	if err != nil {
		t.Fatal(err)
	}
	group := func(cs []collective.Comm) *dp.Group {
		bes := []gpu.Backend{must(cpu.New(w)), must(cpu.New(w))}
		g, err := dp.New(bes, cs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	return group(comms[:2]), group(comms[2:])
}

// connect opens the feed between the leader and host 1 over loopback TCP and starts the real
// follower loop on fg with fctx; the returned channel gets Follow's result.
func connect(t *testing.T, ctx, fctx context.Context, fg *dp.Group, resumeDir string, opt feed.Options) (*feed.Leader, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type accepted struct {
		l   *feed.Leader
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		l, err := feed.Accept(ctx, ln, "test-job", 2, resumeDir, nil, opt)
		acc <- accepted{l, err}
	}()
	f, err := feed.Dial(ctx, ln.Addr().String(), "test-job", 1, 10*time.Millisecond, opt)
	if err != nil {
		t.Fatal(err)
	}
	if f.Welcome.Dir != resumeDir {
		t.Fatalf("welcome dir %q, want %q", f.Welcome.Dir, resumeDir)
	}
	a := <-acc
	if a.err != nil {
		t.Fatal(a.err)
	}
	done := make(chan error, 1)
	go func() {
		defer f.Close()
		done <- Follow(fctx, fg, f, nil, nil)
	}()
	return a.l, done
}

func followerResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not stop")
		return nil
	}
}

// TestTwoHostsEqualOneHost: two GRPO steps of the leader (the whole trainer: source, grouping,
// checkpoints) with a follower host over a loopback TCP feed — 2 + 2 ranks of one 4-rank world —
// equal the same steps on one host with 4 ranks and on one backend (loss, gradient norm,
// entropy, clip fraction, every weight), the checkpoint holds all 4 ranks' optimizer shards, and
// a clean shutdown ends the follower with success, even one told to stop meanwhile. Then two
// new hosts resume from that checkpoint through the feed: every rank's restored optimizer state,
// saved again, is the saved one byte for byte.
func TestTwoHostsEqualOneHost(t *testing.T) {
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, mbs := range []int{1, 2} {
		t.Run(fmt.Sprintf("ppo_n_minibatches=%d", mbs), func(t *testing.T) {
			_, one := trainTwoSteps(t, newBackend(t), mbs)
			g4 := newGroupBackend(t, 4)
			defer g4.Close()
			fourDir, four := trainTwoSteps(t, g4, mbs)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			lg, fg := twoHosts(t, w)
			// The follower is told to stop (as when every host gets SIGTERM) right away: it still
			// serves the leader's steps and checkpoints until the goodbye.
			stopped, stop := context.WithCancel(ctx)
			stop()
			l, done := connect(t, ctx, stopped, fg, "", feed.Options{})
			dir, two := trainTwoStepsFed(t, lg, mbs, l)
			l.Close()
			if err := followerResult(t, done); err != nil {
				t.Fatalf("follower after a clean shutdown: %v", err)
			}

			for _, k := range []string{"loss", "grad_norm", "entropy", "clip_fraction", "approx_kl", "behav_abs_diff"} {
				for _, ref := range []map[string]float64{one.Metrics, four.Metrics} {
					a, b := ref[k], two.Metrics[k]
					if math.Abs(a-b) > 1e-5*max(math.Abs(a), 1e-3) {
						t.Fatalf("%s: one host %v, two hosts %v", k, a, b)
					}
				}
			}
			if two.Metrics["loss_tokens"] != four.Metrics["loss_tokens"] {
				t.Fatalf("loss tokens %v vs %v", two.Metrics["loss_tokens"], four.Metrics["loss_tokens"])
			}
			sameWeights(t, fourDir, dir, 2e-6) // 4 ranks on one host, 2 hosts
			w2 := must(gpu.LoadWeights(dir))
			if two.Optimizer != checkpoint.OptimizerSaved {
				t.Fatalf("optimizer %q", two.Optimizer)
			}
			for r := range 4 {
				if _, err := os.Stat(filepath.Join(dir, dp.ShardFile(r, 4))); err != nil {
					t.Fatalf("rank %d's shard (written by host %d): %v", r, r/2, err)
				}
			}

			// Resume on two new hosts from the checkpoint, the follower told by the feed.
			lg2, fg2 := twoHosts(t, w2)
			l2, done2 := connect(t, ctx, ctx, fg2, dir, feed.Options{})
			m := &checkpoint.Manager{Dir: filepath.Dir(dir), Keep: 2}
			if ok, err := LoadOptimizerHosts(m, dir, two, lg2, l2); err != nil || !ok {
				t.Fatalf("resume on two hosts: %v %v", ok, err)
			}
			again := t.TempDir()
			if err := (hostsSaver{Group: lg2, feed: l2}).SaveOptimizerState(again); err != nil {
				t.Fatal(err)
			}
			l2.Close()
			if err := followerResult(t, done2); err != nil {
				t.Fatal(err)
			}
			for r := range 4 {
				a := must(os.ReadFile(filepath.Join(dir, dp.ShardFile(r, 4))))
				b := must(os.ReadFile(filepath.Join(again, dp.ShardFile(r, 4))))
				if !bytes.Equal(a, b) {
					t.Fatalf("rank %d's optimizer state after the resume differs from the checkpoint's", r)
				}
			}
		})
	}
}

// TestFollowerLostFailsTheLeader: a follower host that goes away mid-run (its loop stopped, its
// connection closed after its first step) makes the leader's Run fail with an error naming the
// host, whether the leader is inside a step's collectives or waiting for data, instead of
// hanging.
func TestFollowerLostFailsTheLeader(t *testing.T) {
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lg, fg := twoHosts(t, w)
	fm, _ := NewMetrics(nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan *feed.Leader, 1)
	go func() {
		l, err := feed.Accept(ctx, ln, "test-job", 2, "", nil, feed.Options{})
		if err != nil {
			t.Error(err)
		}
		acc <- l
	}()
	f, err := feed.Dial(ctx, ln.Addr().String(), "test-job", 1, 10*time.Millisecond, feed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := <-acc
	defer l.Close()
	go Follow(ctx, fg, f, fm, nil)
	go func() {
		for counterValue(t, fm.Steps) < 1 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		f.Close() // the follower's process dies: its connection ends
	}()

	cfg := testConfig(t)
	cfg.BatchSize = 2
	cfg.Actor.MBSpec.MaxTokensPerMB = 40
	// Data for three steps, no step limit: the leader must notice the lost host on its own.
	tr, err := New(cfg, Deps{Backend: lg, Feed: l, Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- tr.Run(ctx) }()
	select {
	case err := <-res:
		if err == nil || !strings.Contains(err.Error(), "host 1") {
			t.Fatalf("leader's error %v, want one naming host 1", err)
		}
		t.Logf("leader: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the leader hangs after losing its follower")
	}
}

// TestStuckFollowerTimesOut: a follower host that stays connected but never takes part (its
// ranks never join the step's collectives) does not hang the leader: the step is aborted after
// the feed's timeout with an error that says so.
func TestStuckFollowerTimesOut(t *testing.T) {
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lg, _ := twoHosts(t, w)
	opt := feed.Options{AckTimeout: 300 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan *feed.Leader, 1)
	go func() {
		l, err := feed.Accept(ctx, ln, "test-job", 2, "", nil, opt)
		if err != nil {
			t.Error(err)
		}
		acc <- l
	}()
	f, err := feed.Dial(ctx, ln.Addr().String(), "test-job", 1, 10*time.Millisecond, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // connected, never reads: stuck
	l := <-acc
	defer l.Close()
	cfg := testConfig(t)
	tr, err := New(cfg, Deps{Backend: lg, Feed: l, Source: newMemSource(groupMessages(t, []string{"0", "1"}, 0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- tr.Run(ctx) }()
	select {
	case err := <-res:
		if err == nil || !strings.Contains(err.Error(), "did not finish the request within 300ms") {
			t.Fatalf("leader's error %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader hangs on a stuck follower")
	}
}
