package tui

import (
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// frames records every distinct screen the program rendered, as plain text.
// Tests wait for a screen with a deadline instead of sleeping, and because
// the history is kept, a state that is on screen only briefly (PAUSING
// before PAUSED) is still seen.
type frames struct {
	mu      sync.Mutex
	all     []string
	changed chan struct{}
}

func newFrames() *frames { return &frames{changed: make(chan struct{})} }

func (f *frames) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.all); n > 0 && f.all[n-1] == s {
		return
	}
	f.all = append(f.all, s)
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFrom waits until a frame at index >= from satisfies cond and returns
// its index; it fails the test after timeout, showing the last frame.
func (f *frames) waitFrom(t testing.TB, from int, timeout time.Duration, what string, cond func(string) bool) int {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		all, ch := f.all, f.changed
		f.mu.Unlock()
		for i := from; i < len(all); i++ {
			if cond(all[i]) {
				return i
			}
		}
		from = max(from, len(all))
		select {
		case <-ch:
		case <-deadline.C:
			last := ""
			if len(all) > 0 {
				last = all[len(all)-1]
			}
			t.Fatalf("waited %s for %s; last screen:\n%s", timeout, what, last)
		}
	}
}

// last returns the newest frame and its index.
func (f *frames) last() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.all) == 0 {
		return "", -1
	}
	return f.all[len(f.all)-1], len(f.all) - 1
}

func (f *frames) since(from int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if from >= len(f.all) {
		return nil
	}
	return append([]string(nil), f.all[from:]...)
}

// recorder wraps the root model so every rendered view is recorded. It
// changes nothing else: messages and commands pass straight through.
type recorder struct {
	m *Model
	f *frames
}

func (r recorder) Init() tea.Cmd { return r.m.Init() }

func (r recorder) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := r.m.Update(msg)
	return r, cmd
}

func (r recorder) View() tea.View {
	v := r.m.View()
	r.f.add(ansi.Strip(v.Content))
	return v
}

// rowsWith returns the screen lines that contain every one of parts.
func rowsWith(screen string, parts ...string) []string {
	var out []string
	for _, l := range strings.Split(screen, "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
