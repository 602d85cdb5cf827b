package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/term"

	"github.com/kmirror/kmirror/engine/props"
)

// readProps parses a .properties file; errors name the file and line.
func readProps(path string) (props.Properties, error) {
	fh, err := os.Open(path)
	if err != nil {
		return props.Properties{}, err
	}
	defer fh.Close()
	p, err := props.Parse(fh)
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// commandConfig reads the destination client's settings, checked like a
// mirror configuration's client settings (a misspelt key is a warning with
// a suggestion, not a silent fallback to PLAINTEXT), and resolves secret
// references.
func commandConfig(path string, stderr io.Writer) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	p, err := readProps(path)
	if err != nil {
		return nil, err
	}
	warnings, err := props.ValidateClientConfig(p)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "kmirror: warning: %s: %s\n", path, w)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := p.Map()
	for k, v := range out {
		r, err := props.ResolveFromEnv(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		out[k] = r
	}
	return out, nil
}

// The terminal a stop of the whole mirror asks on; tests replace them.
var (
	confirmIn  io.Reader = os.Stdin
	onTerminal           = func() bool { return term.IsTerminal(os.Stdin.Fd()) }
)

// errNotConfirmed is a stop of the whole mirror the operator did not confirm.
var errNotConfirmed = errors.New("not confirmed: nothing was recorded")

// confirmStopAll asks for the mirror's name before failing over all of it:
// a stop cannot be undone (the topics become the destination's), so a
// mistyped mirror name must not take a whole mirror with it. --yes skips
// the question. Off a terminal there is no one to ask: the seed's
// `--stop --mirror N` (KIP-1279's failover command, as runbooks script it)
// runs as written; kmirror's own `--stop --all` keeps wanting --yes there.
func confirmStopAll(mirror string, all bool, stderr io.Writer) error {
	if !onTerminal() {
		if all {
			return usagef("--stop --all needs --yes when not run from a terminal")
		}
		return nil
	}
	cmd := "--stop --mirror " + mirror
	if all {
		cmd += " --all"
	}
	fmt.Fprintf(stderr, "%s fails over every topic of mirror %s: they become writable and are never mirrored again.\nType the mirror name to confirm: ", cmd, mirror)
	line, err := bufio.NewReader(confirmIn).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if strings.TrimSpace(line) != mirror {
		return errNotConfirmed
	}
	return nil
}
