// Package tui is kmirror's operator console: a Bubble Tea program that shows
// engine snapshots and sends operator commands. The root model here only
// dispatches: the engine bridge, key routing, actions, dialogs and layout
// each live in their own file, and the screens are components in views.
package tui

import (
	"context"

	"github.com/kmirror/kmirror/engine"
)

// Controller is the engine as the console sees it: an engine.Observer (the
// console's default: it watches the instances and records commands for
// them) or an in-process engine.Engine. Snapshot must be cheap
// and non-blocking (the engine publishes a ready copy); Events delivers
// every event in order; Control may block on the network and is only ever
// called from a command goroutine, never from Update.
type Controller interface {
	Snapshot() engine.Snapshot
	Events() <-chan engine.Event
	Control(ctx context.Context, cmd engine.Command) error
}
