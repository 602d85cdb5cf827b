package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// stateDir is where the console and the demo keep their logs:
// $XDG_STATE_HOME/kmirror, else ~/.local/state/kmirror (XDG Base Directory).
// Never a fixed path under /tmp, which any local user can pre-create or
// link elsewhere. "" when neither the variable nor a home directory is
// known; the log flag must then be given.
func stateDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "kmirror")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "kmirror")
}

// defaultLogPath is the log file name under stateDir ("" when unknown).
func defaultLogPath(getenv func(string) string, name string) string {
	d := stateDir(getenv)
	if d == "" {
		return ""
	}
	return filepath.Join(d, name)
}

// openLog opens path for appending, creating its directory 0700 and the
// file 0600: engine logs name clusters, topics and errors.
func openLog(path string) (*os.File, error) {
	if path == "" {
		return nil, errors.New("no log path: set --log-file, XDG_STATE_HOME or HOME")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return f, nil
}
