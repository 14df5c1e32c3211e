package deploytest

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/lib/proc"
)

// notifySocket plays systemd's side of sd_notify: a unixgram socket that
// records every datagram a service sends.
type notifySocket struct {
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T, path string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	ns := &notifySocket{conn: conn}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			ns.mu.Lock()
			ns.msgs = append(ns.msgs, string(buf[:n]))
			ns.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return ns
}

// count returns how many datagrams contained the assignment s.
func (ns *notifySocket) count(s string) int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	n := 0
	for _, m := range ns.msgs {
		for _, line := range strings.Split(m, "\n") {
			if line == s {
				n++
			}
		}
	}
	return n
}

// TestSystemdNotify checks what Type=notify and WatchdogSec= in the units
// rely on, against every long-running binary: READY=1 once it serves,
// WATCHDOG=1 at least every WATCHDOG_USEC/2 while it runs, STOPPING=1 on
// SIGTERM, then exit status 0. A binary that never sent READY=1 would sit in
// "activating" until TimeoutStartSec and be killed.
func TestSystemdNotify(t *testing.T) {
	dataDir, env := shutdownEnv(t)
	needBinaries(t, "tau2-broker", "tau2-scripted-llm", "tau2-producer", "tau2-archiver", "tau2-trainer", "tau2-proxy")
	dir := t.TempDir()
	brokerAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	llmAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const watchdog = 400 * time.Millisecond
	roles := []struct {
		name, bin string
		args      []string
	}{
		{"broker", "tau2-broker", []string{"addr=" + brokerAddr, "data_dir=" + filepath.Join(dir, "kafka"), "partitions=2"}},
		{"scripted-llm", "tau2-scripted-llm", []string{"addr=" + llmAddr}},
		{"archiver", "tau2-archiver", append(kafkaArgs(brokerAddr), "dataset_dir="+filepath.Join(dir, "dataset"))},
		{"producer", "tau2-producer", append(kafkaArgs(brokerAddr), "policy.endpoints=[http://"+llmAddr+"]",
			"user_llm_base_url=http://"+llmAddr+"/v1", "econfig.domain="+testDomain)},
		{"trainer", "tau2-trainer", append(kafkaArgs(brokerAddr), "checkpoint.dir="+filepath.Join(dir, "checkpoints"),
			"model.config="+repoPath("deploy/models/qwen3-tiny/config.json"), "admission.enabled=false", "data_dir="+dataDir)},
		// The capture proxy (tau2-proxy.service); it calls the policy only when an agent calls it.
		{"proxy", "tau2-proxy", append(kafkaArgs(brokerAddr), "listen="+proxyAddr, "auth.disabled=true",
			"policy.endpoints=[http://"+llmAddr+"]")},
	}
	var procs []*proc.Proc
	var sockets []*notifySocket
	for _, r := range roles {
		sock := filepath.Join(dir, r.name+".notify")
		ns := listenNotify(t, sock)
		p := startHealthy(t, &proc.Spec{Name: r.name, Bin: bins.Path(r.bin), Dir: dir, Args: r.args,
			Env: append([]string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=" + fmtUsec(watchdog)}, env...)})
		procs = append(procs, p)
		sockets = append(sockets, ns)
	}
	// Every process has been ready for a while: count pings over 2 s.
	for i, p := range procs {
		if sockets[i].count("READY=1") != 1 {
			t.Errorf("%s: sent READY=1 %d times, want once", p.Name, sockets[i].count("READY=1"))
		}
	}
	base := make([]int, len(procs))
	for i := range procs {
		base[i] = sockets[i].count("WATCHDOG=1")
	}
	time.Sleep(2 * time.Second)
	for i, p := range procs {
		// One ping per WATCHDOG_USEC/2 = 200 ms: about 10 in 2 s. Allow for a loaded machine.
		if got := sockets[i].count("WATCHDOG=1") - base[i]; got < 4 {
			t.Errorf("%s: %d watchdog pings in 2s with WATCHDOG_USEC=%s; systemd would kill it", p.Name, got, fmtUsec(watchdog))
		}
	}
	for i := len(procs) - 1; i >= 0; i-- {
		stopClean(t, procs[i], time.Minute)
		if sockets[i].count("STOPPING=1") != 1 {
			t.Errorf("%s: sent STOPPING=1 %d times on SIGTERM, want once", procs[i].Name, sockets[i].count("STOPPING=1"))
		}
	}
}

func fmtUsec(d time.Duration) string { return strconv.FormatInt(int64(d/time.Microsecond), 10) }
