package tui

import (
	"context"
	"errors"
	"fmt"
	"os"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
)

// Run runs the console on the terminal (alternate screen) until the
// operator quits or ctx ends. Quitting, and ctx ending, both return nil:
// the caller that cancelled ctx knows why. The console writes nothing but
// its screen to the terminal; logging is the caller's, to LogPath.
func Run(ctx context.Context, c Controller, opts Options) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("console options: %w", err)
	}
	if noColorEnv() {
		opts.NoColor = true
	}
	if !utf8Locale(os.Getenv) {
		opts.ASCII = true
	}
	m := newModel(ctx, c, opts)
	defer m.cancel()
	progOpts := []tea.ProgramOption{tea.WithContext(ctx)}
	if opts.NoColor {
		// Colourless styles already carry no colour; forcing the profile also
		// strips anything a component might add.
		progOpts = append(progOpts, tea.WithColorProfile(colorprofile.ASCII))
	}
	_, err := tea.NewProgram(m, progOpts...).Run()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}
