package main

import (
	"bytes"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/engine"
)

// optionArgs gives each option of the action table its command-line form.
func optionArgs(work string) map[string][]string {
	return map[string][]string{
		"mirror":                  {"--mirror", "a-to-b"},
		"mirror-config":           {"--mirror-config", filepath.Join(work, "m.properties")},
		"allow-plaintext-secrets": {"--allow-plaintext-secrets"},
		"json":                    {"--json"},
		"failed":                  {"--failed"},
		"topics":                  {"--topics", "orders,clicks-.*"},
		"exclude":                 {"--exclude", "clicks-test,x.*"},
		"all":                     {"--all"},
		"yes":                     {"--yes"},
		"wait":                    {"--wait"},
		"timeout":                 {"--timeout", "10ms"},
		"rebuild":                 {"--rebuild"},
	}
}

// TestActionFlagCombinations runs every action with every combination of
// its own options, and with each option of another action, against a
// cluster pair: no input panics, and the exit code is 0, 1 or 2 only. A
// foreign option is always 2.
func TestActionFlagCombinations(t *testing.T) {
	s := newScript(t)
	for _, c := range [][]string{{"topic", "orders", "1"}, {"file", "m.properties", "bootstrap.servers=" + strings.Join(s.src.Addrs(), ",")}} {
		if err := s.command(c); err != nil {
			t.Fatal(err)
		}
	}
	dst := strings.Join(s.dst.Addrs(), ",")
	opts := optionArgs(s.work)
	var allOptions []string
	for _, a := range actionSpecs {
		for _, o := range a.options {
			if !slices.Contains(allOptions, o) {
				allOptions = append(allOptions, o)
			}
		}
	}
	runs := 0
	try := func(args []string, want ...int) {
		t.Helper()
		runs++
		var out, errb bytes.Buffer
		code := func() (code int) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%v panicked: %v", args, r)
				}
			}()
			return run(args, &out, &errb)
		}()
		if !slices.Contains(want, code) {
			t.Errorf("%v: exit %d, want one of %v\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		if code == exitUsage && !strings.Contains(errb.String(), "kmirror: ") {
			t.Errorf("%v: exit 2 without a message: %q", args, errb.String())
		}
	}
	for _, a := range actionSpecs {
		for mask := range 1 << len(a.options) {
			args := []string{"--bootstrap-server", dst, "--" + a.name}
			for i, o := range a.options {
				if mask&(1<<i) != 0 {
					args = append(args, opts[o]...)
				}
			}
			try(args, exitOK, exitFail, exitUsage)
		}
		for _, o := range allOptions {
			if !slices.Contains(a.options, o) {
				try(append([]string{"--bootstrap-server", dst, "--" + a.name, "--mirror", "a-to-b"}, opts[o]...), exitUsage)
			}
		}
		try([]string{"--" + a.name}, exitUsage) // no --bootstrap-server
		other := "--list"
		if a.name == "list" {
			other = "--describe"
		}
		try([]string{"--bootstrap-server", dst, "--" + a.name, other}, exitUsage)
		try([]string{"--bootstrap-server", dst, "--" + a.name, "stray"}, exitUsage)
	}
	t.Logf("%d command lines", runs)
}

// FuzzActionArgs checks command lines without a cluster: parsing and the
// action checks never panic, whatever the flags and values.
func FuzzActionArgs(f *testing.F) {
	f.Add("--stop --mirror m --all --yes")
	f.Add("--start --mirror m --topics a,(b|c),d{1,2} --exclude x")
	f.Add("--pause --mirror m --exclude x --json --failed")
	f.Add("--describe --failed --timeout 0s")
	f.Add("--recover --topics , --all --rebuild")
	f.Fuzz(func(t *testing.T, line string) {
		f := actionFlags{set: map[string]bool{}}
		fs := newActionFlagSet(&f)
		args := append([]string{"--bootstrap-server", "b:1"}, strings.Fields(line)...)
		if fs.Parse(args) != nil {
			return
		}
		fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
		p, err := check(&f, fs.Args())
		// Only --stop selects the whole mirror when bare (the seed's
		// failover command); the others need --all to.
		if err == nil && slices.Contains([]string{"pause", "resume", "recover"}, p.action) && p.sel == nil && !f.all {
			t.Fatalf("%q: %s selects every topic without --all", line, p.action)
		}
	})
}

func TestRetryAndErrorColumns(t *testing.T) {
	tests := []struct {
		row  engine.DescribeRow
		want string
	}{
		{engine.DescribeRow{Retryable: true, RetryAttempt: 3, RetryMaxAttempts: 20}, "3/20"},
		{engine.DescribeRow{Retryable: false, RetryAttempt: 20, RetryMaxAttempts: 20}, "NonRetryable"},
		{engine.DescribeRow{Retryable: false, RetryMaxAttempts: 0}, "NonRetryable"},
	}
	for _, tt := range tests {
		if got := retryColumn(tt.row); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.row, got, tt.want)
		}
	}
	long := strings.Repeat("é", 100)
	if got := cut(long, 80); len([]rune(got)) != 80 || !strings.HasSuffix(got, "…") {
		t.Errorf("cut to %d runes: %q", len([]rune(got)), got)
	}
	if got := cut("short", 80); got != "short" {
		t.Errorf("short text changed: %q", got)
	}
}

func TestConfirmStopAll(t *testing.T) {
	oldIn, oldTerm := confirmIn, onTerminal
	t.Cleanup(func() { confirmIn, onTerminal = oldIn, oldTerm })
	onTerminal = func() bool { return true }
	for _, all := range []bool{true, false} {
		for _, tt := range []struct {
			typed string
			ok    bool
		}{{"a-to-b\n", true}, {"  a-to-b  \n", true}, {"a-to-c\n", false}, {"", false}} {
			confirmIn = strings.NewReader(tt.typed)
			var prompt bytes.Buffer
			err := confirmStopAll("a-to-b", all, &prompt)
			if (err == nil) != tt.ok || !strings.Contains(prompt.String(), "Type the mirror name to confirm") ||
				!strings.Contains(prompt.String(), "--stop --mirror a-to-b") {
				t.Errorf("all=%v typed %q: err %v, prompt %q", all, tt.typed, err, prompt.String())
			}
		}
	}
	onTerminal = func() bool { return false }
	if err := confirmStopAll("a-to-b", true, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("--all, not a terminal: %v", err)
	}
	// The seed's failover command, scripted: it runs as written.
	var prompt bytes.Buffer
	if err := confirmStopAll("a-to-b", false, &prompt); err != nil || prompt.Len() > 0 {
		t.Errorf("bare --stop, not a terminal: %v, prompt %q", err, prompt.String())
	}
}

// TestBareStopAsksOnATerminal: `--stop --mirror N` on a terminal asks for
// the name before recording anything, and --yes skips the question.
func TestBareStopAsksOnATerminal(t *testing.T) {
	oldIn, oldTerm := confirmIn, onTerminal
	t.Cleanup(func() { confirmIn, onTerminal = oldIn, oldTerm })
	onTerminal = func() bool { return true }
	confirmIn = strings.NewReader("a-to-c\n")
	var out, errb bytes.Buffer
	// Unreachable: a question answered wrongly fails before any connection.
	if code := run([]string{"--bootstrap-server", "127.0.0.1:1", "--stop", "--mirror", "a-to-b"}, &out, &errb); code != exitFail ||
		!strings.Contains(errb.String(), "Type the mirror name") || !strings.Contains(errb.String(), "not confirmed") {
		t.Errorf("wrong name typed: exit %d, stderr %q", code, errb.String())
	}
	confirmIn = strings.NewReader("")
	errb.Reset()
	if code := run([]string{"--bootstrap-server", "127.0.0.1:1", "--stop", "--mirror", "a-to-b", "--yes"}, &out, &errb); code != exitFail ||
		strings.Contains(errb.String(), "Type the mirror name") || !strings.Contains(errb.String(), "unreachable") {
		t.Errorf("--yes: exit %d, stderr %q", code, errb.String())
	}
}

// TestCompletionKnowsEveryFlag checks the completion script against the
// flags the modes and actions really take.
func TestCompletionKnowsEveryFlag(t *testing.T) {
	script := bashCompletion()
	for mode := range modeFlags {
		var out bytes.Buffer
		if code := run([]string{mode, "--help"}, &out, &bytes.Buffer{}); code != exitOK {
			t.Fatalf("%s --help: exit %d", mode, code)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "--"); ok && strings.HasPrefix(line, "  --") {
				name := "--" + strings.Fields(f)[0]
				if !slices.Contains(modeFlags[mode], name) {
					t.Errorf("%s takes %s; completion does not offer it", mode, name)
				}
			}
		}
	}
	for _, a := range actionSpecs {
		if !strings.Contains(script, fmt.Sprintf("--%s) action=", a.name)) {
			t.Errorf("completion lacks the action --%s", a.name)
		}
	}
}
