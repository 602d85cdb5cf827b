package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/tui/tuitest"
)

// Bad options fail before the terminal is touched, so a typo in --theme is
// an error message, not a garbled screen.
func TestRunRejectsBadOptionsBeforeTouchingTheTerminal(t *testing.T) {
	err := Run(context.Background(), tuitest.NewController(tuitest.Snapshot()), Options{Theme: "solarized"})
	if err == nil || !strings.Contains(err.Error(), `unknown theme "solarized"`) {
		t.Fatalf("Run = %v", err)
	}
}
