package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/views"
)

// The bridge between the engine and the UI (STYLE rule 8). Snapshots are
// lossy: the console polls the latest one on a tick and never queues them.
// Events must all be shown: one command waits on the channel, takes whatever
// else is already queued (coalescing a burst into one message) and is
// re-armed by Update. Commands to the engine run in their own goroutine and
// report back as a message. Nothing here blocks Update.

// maxEventBatch bounds one coalesced delivery so a flood of events cannot
// starve key handling.
const maxEventBatch = 512

// controlTimeout bounds one engine command. A stop of thousands of
// partitions waits for transaction markers, so it is generous; it exists so
// a hung engine cannot hold a goroutine for the life of the console.
const controlTimeout = 2 * time.Minute

// snapshotMsg carries a polled snapshot. rearm is true for the tick loop's
// own polls: only those schedule the next tick, so extra polls (after a
// command) never start a second loop.
type snapshotMsg struct {
	snap  engine.Snapshot
	rearm bool
}

// eventsMsg carries events in delivery order; closed reports that the
// channel was closed after them.
type eventsMsg struct {
	events []engine.Event
	closed bool
}

// controlDoneMsg reports the outcome of one engine command.
type controlDoneMsg struct {
	cmd engine.Command
	err error
}

// pollNow fetches a snapshot right away, off the UI goroutine.
func (m *Model) pollNow() tea.Cmd {
	c := m.ctrl
	return func() tea.Msg { return snapshotMsg{snap: c.Snapshot()} }
}

// pollAfter is the tick loop: one snapshot after the current interval.
func (m *Model) pollAfter(d time.Duration) tea.Cmd {
	c := m.ctrl
	return tea.Tick(d, func(time.Time) tea.Msg { return snapshotMsg{snap: c.Snapshot(), rearm: true} })
}

// waitEvents waits for the next events; it returns nil when the console
// is quitting.
func (m *Model) waitEvents() tea.Cmd {
	ctx, ch := m.ctx, m.ctrl.Events()
	return func() tea.Msg {
		var first engine.Event
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return eventsMsg{closed: true}
			}
			first = ev
		}
		evs := []engine.Event{first}
		for len(evs) < maxEventBatch {
			select {
			case ev, ok := <-ch:
				if !ok {
					return eventsMsg{events: evs, closed: true}
				}
				evs = append(evs, ev)
			default:
				return eventsMsg{events: evs}
			}
		}
		return eventsMsg{events: evs}
	}
}

// control runs one command in a goroutine.
func (m *Model) control(cmd engine.Command) tea.Cmd {
	ctx, c := m.ctx, m.ctrl
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, controlTimeout)
		defer cancel()
		return controlDoneMsg{cmd: cmd, err: c.Control(cctx, cmd)}
	}
}

func (m *Model) onSnapshot(msg snapshotMsg) tea.Cmd {
	// A snapshot never taken is an observer still reading __mirror_state:
	// the header keeps waiting rather than show half-replayed state.
	if !msg.snap.Taken.IsZero() {
		m.applySnapshot(msg.snap)
	}
	if msg.rearm || !m.ticking {
		m.ticking = true
		return m.pollAfter(m.tick)
	}
	return nil
}

// applySnapshot hands a snapshot to every view that shows snapshot data.
func (m *Model) applySnapshot(snap engine.Snapshot) {
	m.snap, m.haveSnap = snap, true
	m.header.SetSnapshot(snap, views.Summarize(&snap))
	m.relayout()
	etas := m.catchup.Observe(&snap)
	m.mirrors.SetETAs(etas)
	m.topics.SetETAs(etas)
	m.partitions.SetETAs(etas)
	m.mirrors.SetSnapshot(snap)
	m.topics.SetSnapshot(snap)
	m.partitions.SetSnapshot(snap)
	m.detail.SetSnapshot(snap)
	m.groups.SetSnapshot(snap)
	if !m.picked {
		n := 0
		for i := range snap.Mirrors {
			n += len(snap.Mirrors[i].Partitions)
		}
		m.screen = defaultScreen(n)
	}
}

func (m *Model) onEvents(msg eventsMsg) tea.Cmd {
	m.events.Append(msg.events...)
	if msg.closed {
		m.eventsClosed = true
		m.setStatus("engine event stream closed: no further events will be shown", true)
		return nil
	}
	return m.waitEvents()
}

func (m *Model) onControlDone(msg controlDoneMsg) tea.Cmd {
	what := describeCommand(msg.cmd)
	if msg.err != nil {
		text := fmt.Sprintf("%s failed: %v", what, msg.err)
		m.setStatus(text, true)
		m.events.Append(engine.Event{
			Time: m.opts.Now(), Level: engine.LevelError, Mirror: msg.cmd.Mirror,
			Topic: strings.Join(msg.cmd.Topics, ","), Partition: -1,
			Message: "console: " + text,
		})
		return nil
	}
	m.setStatus(what+" accepted by the engine", false)
	// Show the effect now rather than at the next tick.
	return m.pollNow()
}

// describeCommand names a command the way the status line and the event log
// show it: "stop a-to-b: orders, payments" or "pause a-to-b (whole mirror)".
func describeCommand(cmd engine.Command) string {
	kind := cmd.Kind.String()
	if cmd.Rebuild {
		kind += " with rebuild"
	}
	if len(cmd.Topics) == 0 {
		return kind + " " + cmd.Mirror + " (whole mirror)"
	}
	return kind + " " + cmd.Mirror + ": " + strings.Join(cmd.Topics, ", ")
}
