package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/tui/tuitest"
)

// observedMirror records mirror a-to-b of topic orders on dst and joins an
// in-process instance "one" that runs it.
func observedMirror(t *testing.T, src, dst *enginetest.Cluster) {
	t.Helper()
	ctx := t.Context()
	src.CreateTopic(t, "orders", 2, nil)
	enginetest.Produce(t, src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 2, 30, "before")
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	cfg := props.FromMap(map[string]string{props.KeyBootstrapServers: strings.Join(src.Addrs(), ",")})
	if _, err := adm.CreateMirror(ctx, "a-to-b", cfg, false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{Destination: dst.Addrs(), Instance: "one", HeartbeatInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.Join(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFlowObserverSourceStopped runs the console over a real observer of a
// destination where instance "one" mirrors a-to-b: the partitions show as
// its, MIRRORING. The source is stopped; after two refreshes of the
// observer the header carries the SOURCE UNREACHABLE banner.
func TestFlowObserverSourceStopped(t *testing.T) {
	src, dst := enginetest.Pair(t)
	observedMirror(t, src, dst)
	ticks := make(chan time.Time)
	o, err := engine.NewObserver(t.Context(), engine.ObserverConfig{Destination: dst.Addrs(), ReadOnly: true, Ticks: ticks, PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	// refresh has the observer take one look and waits until it is done.
	refresh := func() {
		t.Helper()
		n := o.Refreshes()
		select {
		case ticks <- time.Now():
		case <-time.After(waitLimit):
			t.Fatal("the observer does not take a refresh")
		}
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			return o.Refreshes() > n, "refresh not done"
		})
	}

	f := newFrames()
	m := newModel(t.Context(), o, Options{ReadOnly: true, Tick: MinTick})
	tm := teatest.NewTestModel(t, recorder{m: m, f: f}, teatest.WithInitialTermSize(160, 40))
	t.Cleanup(func() {
		tm.Send(key("ctrl+c"))
		tm.WaitFinished(t, teatest.WithFinalTimeout(waitLimit))
	})
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		refresh()
		snap := o.Snapshot()
		n := 0
		for _, mm := range snap.Mirrors {
			for _, p := range mm.Partitions {
				if p.Owner == "one" && p.State.String() == "MIRRORING" && p.SourceHWM >= 0 {
					n++
				}
			}
		}
		return n == 2, fmt.Sprintf("observed %+v", snap.Mirrors)
	})
	from := f.waitFrom(t, 0, waitLimit, "both partitions MIRRORING, owned by one, observed", func(s string) bool {
		return strings.Count(s, "MIRRORING") >= 2 && strings.Contains(s, "observing") && !strings.Contains(s, "UNREACHABLE")
	})

	src.Close()
	refresh()
	refresh()
	at := f.waitFrom(t, from, waitLimit, "the source banner", contains("SOURCE UNREACHABLE"))
	screen := f.since(at)[0]
	var banner string
	for _, line := range strings.Split(screen, "\n") {
		if strings.Contains(line, "SOURCE UNREACHABLE") {
			banner = strings.TrimSpace(line)
		}
	}
	// Ports and the time since differ from run to run.
	banner = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(banner, "127.0.0.1:PORT")
	banner = regexp.MustCompile(`for \d+(\.\d+)?m?s`).ReplaceAllString(banner, "for T")
	golden.RequireEqual(t, banner)
}

// TestQuitAsksWithAnInstance: a console that runs an instance asks before
// q stops the partitions it owns; n keeps it running, y quits. An observer
// console quits at once.
func TestQuitAsksWithAnInstance(t *testing.T) {
	m, _ := fixture(t, 120, 40, Options{Instance: true})
	snap := tuitest.Snapshot()
	if snap.Instance == "" {
		t.Fatal("the fixture names no instance")
	}
	owned := 0
	for _, mm := range snap.Mirrors {
		for _, p := range mm.Partitions {
			if p.Owner == snap.Instance {
				owned++
			}
		}
	}
	if owned == 0 {
		t.Fatal("the fixture's instance owns nothing")
	}
	_, cmd := m.Update(key("q"))
	if cmd != nil || m.dialog == nil || !m.dialog.quit {
		t.Fatalf("q did not ask: dialog %+v", m.dialog)
	}
	out := ansi.Strip(screen(t, m, colorprofile.ASCII))
	if !strings.Contains(out, "Quit and stop instance "+snap.Instance) || !strings.Contains(out, fmt.Sprintf("%d partitions", owned)) {
		t.Fatalf("quit dialog:\n%s", out)
	}
	press(t, m, "n")
	if m.dialog != nil || m.ctx.Err() != nil {
		t.Fatal("n did not keep the console running")
	}
	m.Update(key("q"))
	if _, cmd := m.Update(key("y")); cmd == nil || m.ctx.Err() == nil {
		t.Fatal("y did not quit")
	}

	obs, _ := fixture(t, 120, 40, Options{})
	if _, cmd := obs.Update(key("q")); cmd == nil || obs.dialog != nil {
		t.Fatal("an observer console asked before quitting")
	}
}
