package knowledge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newTestSandbox builds a sandbox over a tiny KB, skipping (with the
// install advice) when bubblewrap or ripgrep is missing, unless CI's
// TAU2RL_REQUIRE_TOOLS=1 asks for a failure instead.
func newTestSandbox(t *testing.T) *Sandbox {
	t.Helper()
	kb := New([]Document{
		{ID: "doc_cards_001", Title: "Card Fees", Content: "The annual fee is $95.\nProvisional credit applies."},
		{ID: "doc_a/b..c", Title: "Odd id", Content: "odd"},
	})
	s, err := NewSandbox(kb, "") // the system temp dir: traversable by uid 65534 when run as root
	if errors.Is(err, ErrSandboxUnavailable) {
		if os.Getenv("TAU2RL_REQUIRE_TOOLS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if errors.Is(err, ErrSandboxRefused) {
		// Installed, but the host (a container without the capability) refuses the namespaces:
		// nothing the test run can fix, so even CI skips, saying why.
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSandboxExportAndReads(t *testing.T) {
	s := newTestSandbox(t)
	for _, c := range []struct{ cmd, want string }{
		{"ls", "INDEX.md\ndoc_a_b_c.md\ndoc_cards_001.md\n"},
		{"cat doc_cards_001.md", "# Card Fees\n\nThe annual fee is $95.\nProvisional credit applies."},
		{"grep -ri 'provisional' .", "./doc_cards_001.md:Provisional credit applies.\n"},
		{"rg -l fee", "doc_cards_001.md\n"},
		{"head -n 3 INDEX.md", "# Knowledge Base Index\n\n**Total documents:** 2\n"},
		{"pwd", "/knowledge_base\n"},
		{"env | sort", "HOME=/knowledge_base\nLANG=C.UTF-8\nPATH=/usr/bin:/bin\nPWD=/knowledge_base\nSHLVL=1\n_=/usr/bin/env\n"},
	} {
		rc, out, errText := s.Run(context.Background(), c.cmd)
		if rc != 0 || out != c.want {
			t.Errorf("%q: rc %d out %q err %q, want %q", c.cmd, rc, out, errText, c.want)
		}
	}
	_, out, _ := s.Run(context.Background(), "ls -l INDEX.md")
	if !strings.Contains(out, " kb_user  kb_group  ") || !strings.Contains(out, " Jan  1 00:00 INDEX.md") {
		t.Errorf("ls -l not sanitized: %q", out)
	}
}

// TestSandboxHostileCommands: writes, network, fork bombs, huge output,
// long runs and path escapes are refused or cut off, and nothing outside
// the knowledge base (and the read-only /usr) is visible.
func TestSandboxHostileCommands(t *testing.T) {
	s := newTestSandbox(t)
	s.Timeout = 3 * time.Second
	s.MaxOutput = 64 << 10
	for _, c := range []struct {
		name, cmd string
		ok        func(rc int, out, errText string) bool
	}{
		{"write in kb", "echo x > new.md", failsWith("Read-only file system")},
		{"overwrite doc", "echo x >> doc_cards_001.md", func(rc int, out, e string) bool {
			return rc != 0 && (strings.Contains(e, "Read-only file system") || strings.Contains(e, "Permission denied"))
		}},
		{"write elsewhere", `cd "/usr"; touch x`, failsWith("Read-only file system")},
		{"write to tmp", `cd "/"; echo x > tmp_file`, failsWith("Read-only file system")},
		{"dotdot", "cat ../../etc/passwd", failsWith("contains '..'")},
		{"absolute", "cat /etc/passwd", failsWith("absolute path: /etc/passwd")},
		{"home", "ls ~", failsWith("contains '~'")},
		{"quoted escape sees nothing", `cd "/"; ls; cat "etc/passwd"`, func(rc int, out, e string) bool {
			return rc != 0 && !strings.Contains(out, "etc") && !strings.Contains(out, "home") && strings.Contains(e, "No such file")
		}},
		{"host proc hidden", `cd "/proc"; ls -d [0-9]* | wc -l`, func(rc int, out, e string) bool {
			n := strings.TrimSpace(out)
			return rc == 0 && len(n) == 1 // only the sandbox's own few processes
		}},
		{"network tcp", `exec 3<>"/dev/tcp/1.1.1.1/80"`, func(rc int, out, e string) bool { return rc != 0 }},
		{"network interfaces", `cat "/proc/net/dev" | tail -n +3 | cut -d: -f1`, func(rc int, out, e string) bool {
			return strings.TrimSpace(out) == "lo"
		}},
		{"fork bomb", `f(){ f | f & }; f; sleep 1; echo done`, func(rc int, out, e string) bool { return strings.Contains(e, "fork") }},
		{"huge output", "yes", failsWith("output cut at 65536 bytes")},
		{"huge stderr", "yes >&2", failsWith("output cut at 65536 bytes")},
		{"sleep", "sleep 60", func(rc int, out, e string) bool { return rc == 124 && e == "Command timed out after 3 seconds" }},
		{"file size limit", `cd "/dev/shm" 2>/dev/null && dd if=/dev/zero of=x bs=1k count=1`, func(rc int, out, e string) bool { return rc != 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			rc, out, errText := s.Run(context.Background(), c.cmd)
			if !c.ok(rc, out, errText) {
				t.Errorf("%q: rc %d out %.200q err %.300q", c.cmd, rc, out, errText)
			}
			if d := time.Since(start); d > s.Timeout+2*time.Second {
				t.Errorf("%q took %v", c.cmd, d)
			}
		})
	}
}

func failsWith(sub string) func(int, string, string) bool {
	return func(rc int, out, e string) bool { return rc != 0 && strings.Contains(e, sub) }
}

func TestEscapePattern(t *testing.T) {
	for cmd, want := range map[string]string{
		"ls -la":                      "",
		"grep -r 'a/b' .":             "",
		"cat ../x":                    "..",
		"cat /etc/passwd":             "absolute path: /etc/passwd",
		"ls;/bin/ls":                  "absolute path: /bin/ls",
		"/bin/ls":                     "absolute path: /bin/ls",
		"ls ~":                        "~",
		"echo $HOME":                  "$HOME",
		"echo ${HOME}":                "$HOME",
		`grep "~" INDEX.md`:           "",
		"find . -name '*.md' | wc -l": "",
	} {
		if got := escapePattern(cmd); got != want {
			t.Errorf("escapePattern(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestSanitizeFilename(t *testing.T) {
	for in, want := range map[string]string{
		"doc_bank_accounts_bank_accounts_(general)_001": "doc_bank_accounts_bank_accounts__general__001",
		"a/b\\c..d e": "a_b_c_d_e",
		"é-1.x":       "é-1.x",
	} {
		if got := sanitizeFilename(in); got != want {
			t.Errorf("sanitizeFilename(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkSandboxCommand(b *testing.B) {
	kb := New([]Document{{ID: "d", Title: "T", Content: "fee"}})
	s, err := NewSandbox(kb, "")
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	for i := 0; i < b.N; i++ {
		s.Run(context.Background(), "grep -ri fee .")
	}
}

// TestProbeReportsARefusingHost: installed but refused namespaces (a container without the
// capability) are reported once, as ErrSandboxRefused with bwrap's own words, when the sandbox is
// built, instead of every shell command failing later.
func TestProbeReportsARefusingHost(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := probeNamespaces(fake)
	if !errors.Is(err, ErrSandboxRefused) || !strings.Contains(err.Error(), "Operation not permitted") {
		t.Fatalf("probe of a refusing bwrap: %v", err)
	}
	if again := probeNamespaces(fake); again != err {
		t.Fatalf("second probe %v, want the remembered %v", again, err)
	}
}
