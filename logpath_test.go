package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateDirFollowsXDG(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/srv/state", "HOME": "/home/op"}, "/srv/state/kmirror/console.log"},
		{map[string]string{"HOME": "/home/op"}, "/home/op/.local/state/kmirror/console.log"},
		// The spec says a relative XDG value is invalid and to be ignored.
		{map[string]string{"XDG_STATE_HOME": "state", "HOME": "/home/op"}, "/home/op/.local/state/kmirror/console.log"},
	} {
		if got := defaultLogPath(env(tc.env), "console.log"); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestOpenLogPermissions checks the log directory is created 0700 and the
// file 0600 under XDG_STATE_HOME.
func TestOpenLogPermissions(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv("XDG_STATE_HOME", state)
	path := defaultLogPath(os.Getenv, "console.log")
	if want := filepath.Join(state, "kmirror", "console.log"); path != want {
		t.Fatalf("log path %q, want %q", path, want)
	}
	f, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o700 | os.ModeDir, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
		}
	}
	if _, err := openLog(""); err == nil {
		t.Error("an unknown log path opened")
	}
}

// TestConsoleHelpShowsLogPath checks --help names the log file.
func TestConsoleHelpShowsLogPath(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv("XDG_STATE_HOME", state)
	var out, errOut bytes.Buffer
	if code := runInstance(context.Background(), []string{"--help"}, &out, &errOut, true); code != exitOK {
		t.Fatalf("console --help exit %d", code)
	}
	if want := filepath.Join(state, "kmirror", "console.log"); !strings.Contains(out.String(), want) {
		t.Errorf("console --help does not show the log path %s on stdout:\n%s", want, out.String())
	}
	if _, err := os.Stat(state); err == nil {
		t.Error("--help created the state directory")
	}
}
