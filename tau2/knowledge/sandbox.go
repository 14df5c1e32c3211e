package knowledge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
)

// Sandbox is the terminal_use configuration's read-only shell over the
// knowledge base (upstream knowledge/sandbox_manager.py, which uses
// Anthropic's sandbox-runtime). Here every command runs under Debian's
// bubblewrap: a fresh mount namespace holding only /usr (read-only, for
// the tools: sh, bash, grep, rg, awk, sed, …) and the exported documents at
// /knowledge_base (read-only, the working directory); new network (none),
// PID, IPC and UTS namespaces; an empty environment; a process-count limit
// (fork bombs), a zero file-size limit and an address-space limit; a time
// limit (upstream's 30 s) and an output limit. Run as root, the command
// runs as uid/gid 65534 (nobody). Unlike upstream's deny-list, nothing
// outside /usr and the knowledge base exists inside the sandbox.
type Sandbox struct {
	// Dir holds knowledge_base/: one Markdown file per document and INDEX.md.
	Dir string
	// Timeout is the wall-clock limit of a command (default 30 s).
	Timeout time.Duration
	// MaxOutput is the limit in bytes of stdout and of stderr (default
	// 256 KiB); a command writing more is stopped and its output cut.
	MaxOutput             int
	bwrap, prlimit, shell string
	nproc                 int
	asRoot                bool
}

// ErrSandboxUnavailable reports a missing sandbox dependency.
var ErrSandboxUnavailable = errors.New("knowledge: terminal_use sandbox unavailable")

// ErrSandboxRefused reports that bubblewrap is installed but this kernel or container does not let
// it create the namespaces the sandbox runs in (a container without CAP_SYS_ADMIN, unprivileged
// user namespaces disabled): nothing to install, the host has to allow it.
var ErrSandboxRefused = errors.New("knowledge: terminal_use sandbox refused by this host")

var (
	probeMu sync.Mutex
	probed  = map[string]error{} // by bwrap's path
)

// probeNamespaces runs an empty command in bubblewrap's namespaces once per process (per bwrap
// binary), so a host that refuses them is reported when the sandbox is built, not as a failure of
// every command.
func probeNamespaces(bwrap string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	if err, ok := probed[bwrap]; ok {
		return err
	}
	out, err := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true").CombinedOutput()
	if err != nil {
		err = fmt.Errorf("%w: bwrap cannot create its namespaces here (%v: %s); run terminal_use where user namespaces are allowed, or pick a retrieval config without a shell (bm25, grep_only, …)",
			ErrSandboxRefused, err, strings.TrimSpace(string(out)))
	}
	probed[bwrap] = err
	return err
}

// SandboxDeps names the binaries the sandbox needs and their Debian packages.
var SandboxDeps = [][2]string{{"bwrap", "bubblewrap"}, {"rg", "ripgrep"}, {"prlimit", "util-linux"}, {"bash", "bash"}}

// LookupSandboxDeps reports the missing binaries (with install advice, ErrSandboxUnavailable) or,
// with all of them installed, a host that refuses bubblewrap's namespaces (ErrSandboxRefused).
func LookupSandboxDeps() error {
	var missing, pkgs []string
	for _, d := range SandboxDeps {
		if _, err := exec.LookPath(d[0]); err != nil {
			missing = append(missing, d[0])
			pkgs = append(pkgs, d[1])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: not installed: %s (apt-get install %s, or make deps); retrieval configs without a shell (bm25, grep_only, …) need none",
			ErrSandboxUnavailable, strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	bwrap, _ := exec.LookPath("bwrap")
	return probeNamespaces(bwrap)
}

// NewSandbox exports the documents under a new directory in parent ("" =
// the system temp directory) as upstream's export_documents(file_format="md")
// does, and checks the dependencies.
func NewSandbox(kb *KB, parent string) (*Sandbox, error) {
	if err := LookupSandboxDeps(); err != nil {
		return nil, err
	}
	bwrap, _ := exec.LookPath("bwrap")
	dir, err := os.MkdirTemp(parent, "agentic_search_")
	if err != nil {
		return nil, fmt.Errorf("knowledge: sandbox: %w", err)
	}
	s := &Sandbox{Dir: dir, Timeout: 30 * time.Second, MaxOutput: 256 << 10, asRoot: os.Geteuid() == 0}
	s.bwrap = bwrap
	s.prlimit, _ = exec.LookPath("prlimit")
	s.shell = "/usr/bin/bash"
	if err := s.export(kb); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// RLIMIT_NPROC counts every task of the real uid: as root the command
	// runs as nobody; otherwise the limit leaves room above what the user
	// already runs.
	s.nproc = 256
	if !s.asRoot {
		s.nproc += tasksOfUID(os.Getuid())
	}
	return s, nil
}

// Close removes the exported files.
func (s *Sandbox) Close() error { return os.RemoveAll(s.Dir) }

// KBDir is the host path of the exported knowledge base.
func (s *Sandbox) KBDir() string { return filepath.Join(s.Dir, "knowledge_base") }

// sanitizeFilename is upstream's _sanitize_filename.
func sanitizeFilename(name string) string {
	name = strings.NewReplacer("/", "_", "\\", "_").Replace(name)
	name = strings.ReplaceAll(name, "..", "_")
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n == 255 {
			break
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.No, r) || strings.ContainsRune("._-", r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		n++
	}
	return b.String()
}

func (s *Sandbox) export(kb *KB) error {
	d := s.KBDir()
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("knowledge: sandbox: %w", err)
	}
	if err := os.Chmod(s.Dir, 0o755); err != nil { // readable by nobody
		return fmt.Errorf("knowledge: sandbox: %w", err)
	}
	docs := append([]Document(nil), kb.Docs...)
	for _, doc := range docs {
		p := filepath.Join(d, sanitizeFilename(doc.ID)+".md")
		if err := os.WriteFile(p, []byte("# "+doc.Title+"\n\n"+doc.Content), 0o644); err != nil {
			return fmt.Errorf("knowledge: sandbox: %w", err)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].ID < docs[j].ID })
	var b strings.Builder
	fmt.Fprintf(&b, "# Knowledge Base Index\n\n**Total documents:** %d\n\n## Documents\n\n", len(docs))
	for _, doc := range docs {
		fmt.Fprintf(&b, "- **%s.md** - %s\n", sanitizeFilename(doc.ID), doc.Title)
	}
	if err := os.WriteFile(filepath.Join(d, "INDEX.md"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("knowledge: sandbox: %w", err)
	}
	return nil
}

var (
	singleQuoted = regexp.MustCompile(`'[^']*'`)
	doubleQuoted = regexp.MustCompile(`"[^"]*"`)
	absPath      = regexp.MustCompile(`(?:^|[\s;|&])(/[a-zA-Z])`)
	absPathFull  = regexp.MustCompile(`(?:^|[\s;|&])(/[a-zA-Z][^\s;|&]*)`)
)

// escapePattern is upstream's _has_escape_pattern: the refusal reason, or "".
// (The sandbox does not rely on it: nothing outside it is mounted.)
func escapePattern(command string) string {
	st := singleQuoted.ReplaceAllString(command, `""`)
	st = doubleQuoted.ReplaceAllString(st, `""`)
	if strings.Contains(st, "..") {
		return ".."
	}
	if absPath.MatchString(st) {
		if m := absPathFull.FindStringSubmatch(st); m != nil {
			return "absolute path: " + m[1]
		}
	}
	if strings.HasPrefix(strings.TrimSpace(st), "/") {
		return "absolute path at start"
	}
	if strings.Contains(st, "~") {
		return "~"
	}
	if strings.Contains(st, "$HOME") || strings.Contains(st, "${HOME}") {
		return "$HOME"
	}
	return ""
}

var lsLine = regexp.MustCompile(`(?m)^([d\-lrwxst@]+\s+\d+\s+)(\S+)\s+(\S+)\s+(\d+)\s+(\w{3}\s+\d+\s+[\d:]+)\s+(.*)$`)

// sanitizeOutput is upstream's _sanitize_output for ls -l lines (user,
// group and date replaced by fixed values).
func sanitizeOutput(out string) string {
	if out == "" {
		return out
	}
	return lsLine.ReplaceAllString(out, "${1}kb_user  kb_group  ${4} Jan  1 00:00 ${6}")
}

// Run executes one command (upstream run_command): the escape-pattern
// refusal, or the command's exit status, stdout and stderr. A timeout is
// (124, "", "Command timed out after N seconds"); output beyond MaxOutput
// is cut, the command stopped, and stderr says so.
func (s *Sandbox) Run(ctx context.Context, command string) (int, string, string) {
	if p := escapePattern(command); p != "" {
		return 1, "", fmt.Sprintf("Error: Command blocked - contains '%s' which could escape the sandbox", p)
	}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	args := []string{"--nproc=" + strconv.Itoa(s.nproc), "--fsize=0", "--as=" + strconv.Itoa(4<<30), "--",
		s.bwrap, "--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
		"--ro-bind", s.KBDir(), "/knowledge_base", "--chdir", "/knowledge_base",
		"--proc", "/proc", "--dev", "/dev", "--remount-ro", "/",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/knowledge_base",
		"--setenv", "LANG", "C.UTF-8",
		"--", s.shell, "-c", command}
	cmd := exec.Command(s.prlimit, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.asRoot {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	}
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = s.MaxOutput, s.MaxOutput
	over := make(chan struct{}, 2)
	stdout.over, stderr.over = over, over
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return 1, "", "Command failed: " + err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var err error
	timedOut, cut := false, false
	select {
	case err = <-done:
	case <-ctx.Done():
		kill()
		err = <-done
		timedOut = true
	case <-over:
		kill()
		err = <-done
		cut = true
	}
	if timedOut {
		return 124, "", fmt.Sprintf("Command timed out after %d seconds", int(s.Timeout/time.Second))
	}
	rc := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rc = ee.ExitCode()
		if rc < 0 {
			rc = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	} else if err != nil {
		return 1, "", "Command failed: " + err.Error()
	}
	errText := stderr.String()
	if stdout.signaled || stderr.signaled {
		cut = true
	}
	if cut {
		errText += fmt.Sprintf("\n[output cut at %d bytes; command stopped]", s.MaxOutput)
		if rc == 0 {
			rc = 1
		}
	}
	return rc, sanitizeOutput(stdout.String()), sanitizeOutput(errText)
}

// limitedBuffer keeps at most max bytes and signals once when more arrive.
// It must not expose bytes.Buffer's ReadFrom: io.Copy would use it and
// bypass the limit.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	over     chan struct{}
	signaled bool
}

func (b *limitedBuffer) String() string { return b.buf.String() }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		if room > 0 {
			b.buf.Write(p[:room])
		}
		if !b.signaled {
			b.signaled = true
			b.over <- struct{}{}
		}
		return 0, io.ErrShortWrite
	}
	return b.buf.Write(p)
}

// tasksOfUID counts the tasks (threads) the uid runs now, from /proc.
func tasksOfUID(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	want := strconv.Itoa(uid)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var owner bool
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "Uid:") {
				fields := strings.Fields(line)
				owner = len(fields) > 1 && fields[1] == want
			}
			if owner && strings.HasPrefix(line, "Threads:") {
				t, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:")))
				n += t
			}
		}
		f.Close()
	}
	return n
}
