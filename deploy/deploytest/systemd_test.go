package deploytest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// unitFile is a parsed systemd unit: section → key → values in order (a key
// may repeat, and an empty assignment resets it as systemd does).
type unitFile map[string]map[string][]string

func parseUnit(path string) (unitFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				return nil, fmt.Errorf("%s:%d: not key=value in a section: %q", path, n, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if v == "" {
				u[section][k] = []string{""}
				continue
			}
			if vals := u[section][k]; len(vals) == 1 && vals[0] == "" {
				u[section][k] = nil
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u, sc.Err()
}

func (u unitFile) get(section, key string) (string, bool) {
	v, ok := u[section][key]
	if !ok || len(v) == 0 {
		return "", ok
	}
	return v[len(v)-1], true
}

// serviceUnits lists deploy/systemd/*.service.
func serviceUnits(t *testing.T) []string {
	t.Helper()
	units, err := filepath.Glob(repoPath("deploy/systemd/*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in deploy/systemd (%v)", err)
	}
	sort.Strings(units)
	return units
}

// batch jobs run to completion; the others are long-running services.
var batchUnits = map[string]bool{"tau2-replay@.service": true, "tau2-eval@.service": true}

// devUnits are the development-only stand-ins (embedded broker, scripted LLM).
var devUnits = map[string]bool{"tau2-broker.service": true, "tau2-scripted-llm.service": true}

// gpuUnits are the only units that see GPU device nodes: the policy server and the trainer.
var gpuUnits = map[string]bool{"tau2-sampler@.service": true, "tau2-trainer.service": true}

// nvidiaDevices are the DeviceAllow= entries a GPU unit needs (DevicePolicy=closed allows only
// the pseudo devices besides them): the device groups, and the fixed nodes by path for kernels
// whose driver registers no group name.
var nvidiaDevices = []string{
	"char-nvidia-frontend rw", "char-nvidia-uvm rw", "char-nvidia-caps r",
	"/dev/nvidiactl rw", "/dev/nvidia-uvm rw", "/dev/nvidia-uvm-tools rw",
}

// checkDevices holds a unit to the device rule: a GPU unit allows exactly the NVIDIA devices and
// has no PrivateDevices= (its private /dev would hide them); every other unit has
// PrivateDevices=yes and allows no device at all.
func checkDevices(name string, u unitFile) []string {
	var errs []string
	allow := u["Service"]["DeviceAllow"]
	pd, _ := u.get("Service", "PrivateDevices")
	if gpuUnits[name] {
		if !slices.Equal(allow, nvidiaDevices) {
			errs = append(errs, fmt.Sprintf("GPU unit: DeviceAllow=%q, want %q", allow, nvidiaDevices))
		}
		if pd == "yes" {
			errs = append(errs, "GPU unit with PrivateDevices=yes: its private /dev has no NVIDIA nodes")
		}
		return errs
	}
	if len(allow) > 0 {
		errs = append(errs, fmt.Sprintf("DeviceAllow=%q on a unit without a GPU (only %v see devices)", allow, keys(gpuUnits)))
	}
	if pd != "yes" {
		errs = append(errs, fmt.Sprintf("PrivateDevices=%q, want yes (no GPU for this role)", pd))
	}
	return errs
}

// TestNetworkDropIns: every production unit ships an example drop-in that restricts the hosts it
// may reach (IPAddressDeny=any, then IPAddressAllow= for its peers), and its unit points at it;
// the development stand-ins deny the network outright (TestUnitPolicy).
func TestNetworkDropIns(t *testing.T) {
	for _, path := range serviceUnits(t) {
		name := filepath.Base(path)
		if devUnits[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			rel := "deploy/systemd/examples/" + name + ".d/network.conf"
			u, err := parseUnit(repoPath(rel))
			if err != nil {
				t.Fatalf("no network drop-in example: %v", err)
			}
			if deny, _ := u.get("Service", "IPAddressDeny"); deny != "any" {
				t.Errorf("%s: IPAddressDeny=%q, want any", rel, deny)
			}
			allow := u["Service"]["IPAddressAllow"]
			if len(allow) < 2 || allow[0] != "localhost" {
				t.Errorf("%s: IPAddressAllow=%q, want localhost and the unit's peers", rel, allow)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), rel) {
				t.Errorf("%s does not point at %s", name, rel)
			}
		})
	}
}

// TestUnitPolicy holds every unit to the rules of issue 7, statically: the
// hardening, the restart and stop policy, readiness, and no secrets.
func TestUnitPolicy(t *testing.T) {
	required := map[string]string{
		"User": "tau2rl", "Group": "tau2rl", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectSystem": "strict",
		"ProtectHome": "yes", "CapabilityBoundingSet": "", "AmbientCapabilities": "", "DevicePolicy": "closed",
		"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes",
		"RestrictNamespaces": "yes", "LockPersonality": "yes", "SystemCallArchitectures": "native", "KillMode": "mixed",
		"EnvironmentFile": "-/etc/tau2rl/secrets.env",
	}
	covered := map[string]bool{}
	defer func() {
		for _, b := range allBinaries {
			if !covered[b] {
				t.Errorf("no unit runs %s", b)
			}
		}
	}()
	secret := regexp.MustCompile(`(?i)(password|passwd|api_key|apikey|secret|token)\s*[=:]\s*[^%$\s]`)
	for _, path := range serviceUnits(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			u, err := parseUnit(path)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range required {
				if got, ok := u.get("Service", k); !ok || got != want {
					t.Errorf("[Service] %s=%q, want %q", k, got, want)
				}
			}
			for _, e := range checkDevices(name, u) {
				t.Error(e)
			}
			if f := u["Service"]["SystemCallFilter"]; len(f) == 0 || f[0] != "@system-service" {
				t.Errorf("SystemCallFilter=%q, want @system-service first", f)
			}
			if af, _ := u.get("Service", "RestrictAddressFamilies"); af != "AF_INET AF_INET6 AF_UNIX" {
				t.Errorf("RestrictAddressFamilies=%q, want IP and Unix sockets only", af)
			}
			if sd, _ := u.get("Service", "StateDirectory"); !strings.HasPrefix(sd, "tau2rl/") {
				t.Errorf("StateDirectory=%q, want tau2rl/<role>", sd)
			}
			if _, ok := u.get("Service", "ReadWritePaths"); ok {
				t.Errorf("ReadWritePaths in the base unit: only StateDirectory is writable; extra paths belong in drop-ins")
			}
			if _, ok := u.get("Service", "TimeoutStopSec"); !ok {
				t.Errorf("no TimeoutStopSec: the graceful shutdown needs an explicit bound")
			}
			exec, _ := u.get("Service", "ExecStart")
			if f := strings.Fields(exec); len(f) > 0 {
				covered[filepath.Base(f[0])] = true
			}
			if !strings.HasPrefix(exec, "/usr/local/bin/tau2-") || !strings.Contains(exec, "--config /etc/tau2rl/") {
				t.Errorf("ExecStart=%q: want /usr/local/bin/tau2-* --config /etc/tau2rl/…", exec)
			}
			if strings.Contains(name, "@") && !strings.Contains(exec, "%i") {
				t.Errorf("template unit's ExecStart does not use the instance name %%i: %q", exec)
			}
			raw, _ := os.ReadFile(path)
			for _, line := range strings.Split(string(raw), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "#") && secret.MatchString(line) {
					t.Errorf("a secret-looking assignment in the unit: %q (secrets come from secrets.env or LoadCredential)", line)
				}
			}
			if devUnits[name] {
				if d, _ := u.get("Unit", "Description"); !strings.Contains(d, "development only") {
					t.Errorf("development stand-in without \"development only\" in its Description: %q", d)
				}
				if deny, _ := u.get("Service", "IPAddressDeny"); deny != "any" {
					t.Errorf("development stand-in reachable from the network: IPAddressDeny=%q, want any (loopback allowed)", deny)
				}
			}
			if batchUnits[name] {
				if r, _ := u.get("Service", "Restart"); r != "no" {
					t.Errorf("batch job Restart=%q, want no (a restart would start the job over)", r)
				}
				return
			}
			want := map[string]string{"Type": "notify", "Restart": "on-failure", "RestartPreventExitStatus": "2", "NotifyAccess": "main"}
			for k, v := range want {
				if got, _ := u.get("Service", k); got != v {
					t.Errorf("[Service] %s=%q, want %q", k, got, v)
				}
			}
			for _, k := range []string{"WatchdogSec", "RestartSec", "TimeoutStartSec"} {
				if _, ok := u.get("Service", k); !ok {
					t.Errorf("[Service] %s missing", k)
				}
			}
			for _, k := range []string{"StartLimitIntervalSec", "StartLimitBurst"} {
				if _, ok := u.get("Unit", k); !ok {
					t.Errorf("[Unit] %s missing (restart backoff)", k)
				}
			}
			if got, _ := u.get("Install", "WantedBy"); got != "tau2rl.target" {
				t.Errorf("WantedBy=%q, want tau2rl.target", got)
			}
			if got, _ := u.get("Unit", "PartOf"); got != "tau2rl.target" {
				t.Errorf("PartOf=%q, want tau2rl.target", got)
			}
		})
	}
}

// stage installs deploy/ with the real install script and the real binaries
// into a temporary root, plus the host's own systemd units (sysinit.target and
// friends, which verify resolves dependencies against).
func stage(t *testing.T) string {
	t.Helper()
	needTool(t, "systemd-analyze")
	needTool(t, "systemd-sysusers")
	needTool(t, "systemd-tmpfiles")
	needBinaries(t, allBinaries...)
	dest := t.TempDir()
	out, err := exec.Command("bash", repoPath("deploy/scripts/install.sh"), "--bin", bins.Dir, "--destdir", dest).CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	hostUnits := ""
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(d, "sysinit.target")); err == nil {
			hostUnits = d
			break
		}
	}
	if hostUnits == "" {
		t.Skip("the host has no systemd unit directory with sysinit.target (package systemd)")
	}
	if err := os.MkdirAll(filepath.Join(dest, "usr/lib/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", hostUnits, filepath.Join(dest, "usr/lib/systemd/system")).CombinedOutput(); err != nil {
		t.Fatalf("copy host units: %v\n%s", err, out)
	}
	// The host's /bin/kill, which ExecReload= runs (verify checks that it is executable).
	if err := os.MkdirAll(filepath.Join(dest, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-L", "/bin/kill", filepath.Join(dest, "bin/kill")).CombinedOutput(); err != nil {
		t.Fatalf("copy /bin/kill: %v\n%s", err, out)
	}
	return dest
}

// instanceName turns a template file name into an instance to verify.
func instanceName(file string) string {
	if i := strings.Index(file, "@."); i >= 0 {
		return file[:i] + "@example" + file[i+1:]
	}
	return file
}

// verify runs systemd-analyze verify in root; any output is a finding
// (unknown keys are only warnings with exit status 0, so both count).
func verify(root string, units ...string) (string, error) {
	args := append([]string{"--root=" + root, "verify", "--man=no"}, units...)
	cmd := exec.Command("systemd-analyze", args...)
	cmd.Dir = filepath.Join(root, "etc/systemd/system")
	out, err := cmd.CombinedOutput()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		err = fmt.Errorf("warnings")
	}
	return string(out), err
}

// TestSystemdVerify installs everything into a staging root with
// deploy/scripts/install.sh and runs systemd-analyze verify (the binaries
// must exist at the ExecStart paths), then again with the example drop-ins in
// place, then the security assessment; sysusers and tmpfiles must create the
// user and the secret file's mode.
func TestSystemdVerify(t *testing.T) {
	dest := stage(t)
	var units []string
	for _, p := range serviceUnits(t) {
		units = append(units, instanceName(filepath.Base(p)))
	}
	units = append(units, "tau2rl.target")
	if out, err := verify(dest, units...); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The check can fail: a misspelt key in a copy of a unit is reported.
	good, err := os.ReadFile(filepath.Join(dest, "etc/systemd/system/tau2-archiver.service"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(good), "ProtectSystem=strict", "ProtectSystm=strict", 1)
	if err := os.WriteFile(filepath.Join(dest, "etc/systemd/system/tau2-typo.service"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(dest, "tau2-typo.service"); err == nil || !strings.Contains(out, "ProtectSystm") {
		t.Errorf("verify did not flag a misspelt key (err %v):\n%s", err, out)
	}
	os.Remove(filepath.Join(dest, "etc/systemd/system/tau2-typo.service"))

	// Drop-in examples, installed where an operator puts them.
	dropins, err := filepath.Glob(repoPath("deploy/systemd/examples/*.d/*.conf"))
	if err != nil || len(dropins) == 0 {
		t.Fatalf("no drop-in examples (%v)", err)
	}
	var withDropins []string
	for _, d := range dropins {
		dir := filepath.Base(filepath.Dir(d))
		target := filepath.Join(dest, "etc/systemd/system", dir)
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(target, filepath.Base(d)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		withDropins = append(withDropins, instanceName(strings.TrimSuffix(dir, ".d")))
	}
	if out, err := verify(dest, withDropins...); err != nil {
		t.Fatalf("systemd-analyze verify with drop-ins: %v\n%s", err, out)
	}

	// Exposure as systemd rates it: 2.0 or better ("OK") for every service.
	for _, u := range units[:len(units)-1] {
		cmd := exec.Command("systemd-analyze", "--root="+dest, "security", "--offline=true", "--threshold=20", u)
		out, err := cmd.CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Errorf("%s: exposure above 2.0 (%v): %s", u, err, lines[len(lines)-1])
		}
	}

	passwd, err := os.ReadFile(filepath.Join(dest, "etc/passwd"))
	if err != nil || !regexp.MustCompile(`(?m)^tau2rl:x:\d+:\d+:[^:]*:/var/lib/tau2rl:/usr/sbin/nologin$`).Match(passwd) {
		t.Errorf("sysusers did not create the tau2rl system user (%v):\n%s", err, passwd)
	}
	for path, mode := range map[string]os.FileMode{"etc/tau2rl": 0o750 | os.ModeDir, "etc/tau2rl/secrets.env": 0o600, "etc/tau2rl/credentials": 0o700 | os.ModeDir, "var/lib/tau2rl": 0o750 | os.ModeDir} {
		st, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("tmpfiles: %v", err)
			continue
		}
		if st.Mode() != mode {
			t.Errorf("/%s has mode %v, want %v", path, st.Mode(), mode)
		}
	}
	for _, b := range allBinaries {
		if st, err := os.Stat(filepath.Join(dest, "usr/local/bin", b)); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("/usr/local/bin/%s not installed executable (%v)", b, err)
		}
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }

// TestCheckDevices: the device rule flags a GPU unit that lost a device or gained a private
// /dev, and a CPU unit that gained a device.
func TestCheckDevices(t *testing.T) {
	gpu := func(allow []string, pd string) unitFile {
		u := unitFile{"Service": {"DeviceAllow": allow}}
		if pd != "" {
			u["Service"]["PrivateDevices"] = []string{pd}
		}
		return u
	}
	tests := []struct {
		name, unit string
		u          unitFile
		bad        bool
	}{
		{"gpu ok", "tau2-sampler@.service", gpu(nvidiaDevices, ""), false},
		{"gpu missing uvm", "tau2-sampler@.service", gpu(nvidiaDevices[:1], ""), true},
		{"gpu private dev", "tau2-trainer.service", gpu(nvidiaDevices, "yes"), true},
		{"cpu ok", "tau2-proxy.service", gpu(nil, "yes"), false},
		{"cpu with gpu", "tau2-proxy.service", gpu(nvidiaDevices, "yes"), true},
		{"cpu without private dev", "tau2-producer@.service", gpu(nil, ""), true},
	}
	for _, tc := range tests {
		if errs := checkDevices(tc.unit, tc.u); (len(errs) > 0) != tc.bad {
			t.Errorf("%s: checkDevices = %q, want findings %v", tc.name, errs, tc.bad)
		}
	}
}
