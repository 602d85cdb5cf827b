package views

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/tui/tuitest"
)

// outageSnapshot is the fixture with mirror a-to-b's source down for 72 s:
// its partitions FAILED or still in the state they had, their source ends
// unknown, their lag in time grown.
func outageSnapshot() engine.Snapshot {
	snap := tuitest.Snapshot()
	m := &snap.Mirrors[0]
	m.SourceReach = engine.Reachability{Down: true, DownSince: snap.Taken.Add(-72 * time.Second), LastOK: snap.Taken.Add(-73 * time.Second), Error: "dial tcp 10.0.0.1:9092: connect: connection refused"}
	for i := range m.Partitions {
		p := &m.Partitions[i]
		p.SourceHWM, p.Lag = -1, 0
		if needsSource(p.State) { // as the engine's outage does
			p.LagAtContact = p.LagTime
			p.LagTime = max(p.LagTime, 73*time.Second)
		}
		if p.State == partition.Mirroring {
			p.State, p.Cause, p.Retryable = partition.Failed, partition.CauseSourceUnreachable, true
		}
	}
	return snap
}

// TestHeaderSaysTheSourceIsUnreachable: with a mirror's source down the
// header carries an error line naming it and for how long, the lag in
// records reads "unknown" and the RPO is the range the console can prove
// (at least the worst lag at the last answer, 1m24s; at most that plus the
// 73 s since), all in the error style; nothing says "lag 0", nor gives the
// time since the last answer as a lower bound (before: "RPO ≥ 1m24s" from
// the grown lag time).
func TestHeaderSaysTheSourceIsUnreachable(t *testing.T) {
	skin := testSkin()
	for _, w := range []int{80, 160} {
		h := NewHeader(skin)
		h.SetSize(w)
		snap := outageSnapshot()
		h.SetSnapshot(snap, Summarize(&snap))
		raw := h.View()
		out := ansi.Strip(raw)
		if strings.Contains(out, "lag 0 records") || !strings.Contains(out, "lag unknown") || !strings.Contains(out, "RPO between 1m24s and 2m37s") || strings.Contains(out, "≥") {
			t.Fatalf("header at %d columns:\n%s", w, out)
		}
		if !strings.Contains(raw, skin.Err.Render("unknown")) || !strings.Contains(raw, skin.Err.Render("between 1m24s and 2m37s")) {
			t.Fatalf("lag and RPO not in the error style at %d columns", w)
		}
		banner := strings.Split(out, "\n")[2]
		if !strings.HasPrefix(banner, "SOURCE UNREACHABLE") || !strings.Contains(raw, skin.Err.Render(strings.TrimRight(banner, " "))) {
			t.Fatalf("no error banner at %d columns:\n%s", w, out)
		}
		t.Run(itoa(w), func(t *testing.T) { golden.RequireEqual(t, out) })
	}
}

// TestMirrorCardSaysTheSourceIsUnreachable: the mirrors view marks the
// mirror whose source is down and its lag, in the error style.
func TestMirrorCardSaysTheSourceIsUnreachable(t *testing.T) {
	skin := testSkin()
	v := NewMirrors(skin, keymap.New(false))
	v.SetSize(120, 30)
	v.SetSnapshot(outageSnapshot())
	out := ansi.Strip(v.View())
	if !strings.Contains(out, "UNREACHABLE for 1m12s") || !strings.Contains(out, "lag unknown  RPO between 1m24s and 2m37s") {
		t.Fatalf("mirrors view:\n%s", out)
	}
	if strings.Count(out, "UNREACHABLE") != 1 {
		t.Fatalf("only a-to-b's source is down:\n%s", out)
	}
}

// TestMirrorCardShowsTheSourceRoundTrip: the mirror card shows the round
// trips the instance measured to the source brokers (the shortest to the
// longest, under a millisecond as such), and nothing when there are none.
func TestMirrorCardShowsTheSourceRoundTrip(t *testing.T) {
	v := NewMirrors(testSkin(), keymap.New(false))
	v.SetSize(120, 30)
	snap := tuitest.Snapshot()
	v.SetSnapshot(snap)
	if out := ansi.Strip(v.View()); strings.Contains(out, "rtt") {
		t.Fatalf("no round trip measured, yet the card shows one:\n%s", out)
	}
	snap.Mirrors[0].SourceRoundTrips = []engine.BrokerRoundTrip{{Broker: 1, RTT: 51 * time.Millisecond}, {Broker: 2, RTT: 2 * time.Millisecond}}
	snap.Mirrors[1].SourceRoundTrips = []engine.BrokerRoundTrip{{Broker: 1, RTT: 300 * time.Microsecond}}
	v.SetSnapshot(snap)
	out := ansi.Strip(v.View())
	if !strings.Contains(out, "rtt 2ms–51ms") || !strings.Contains(out, "rtt <1ms") {
		t.Fatalf("mirrors view without both mirrors' round trips:\n%s", out)
	}
}

// bannerSnapshot is an observer's fixture: the destination has not
// answered for 20 s, three partitions have no live owner, two of them
// recorded to instance "east-1", gone quiet 42 s ago.
func bannerSnapshot() engine.Snapshot {
	snap := tuitest.Snapshot()
	snap.Instance, snap.Observer = "", true
	snap.DestReach = engine.Reachability{Down: true, DownSince: snap.Taken.Add(-20 * time.Second), LastOK: snap.Taken.Add(-21 * time.Second), Error: "dial tcp 10.0.0.2:9092: i/o timeout"}
	snap.Unowned = engine.Unowned{Partitions: 3, Since: snap.Taken.Add(-42 * time.Second)}
	snap.Lost = []engine.LostInstance{{ID: "east-1", LastHeartbeat: snap.Taken.Add(-42 * time.Second), Partitions: 2}}
	return snap
}

// TestHeaderBanners: what an observer finds wrong is said in the header,
// each in the error style with how long it has lasted: the destination not
// answering, partitions without a live owner, the instance that was lost.
func TestHeaderBanners(t *testing.T) {
	skin := testSkin()
	for _, w := range []int{80, 160} {
		h := NewHeader(skin)
		h.SetSize(w)
		snap := bannerSnapshot()
		h.SetSnapshot(snap, Summarize(&snap))
		raw := h.View()
		out := ansi.Strip(raw)
		lines := strings.Split(out, "\n")
		want := []string{"DESTINATION UNREACHABLE ", "no live instance owns 3 partitions (for 42s)", "instance lost: east-1 (heartbeat 42s old)"}
		if len(lines) < 5 {
			t.Fatalf("header at %d columns:\n%s", w, out)
		}
		for i, prefix := range want {
			line := strings.TrimRight(lines[2+i], " ")
			if !strings.HasPrefix(line, prefix[:min(len(prefix), w)]) || !strings.Contains(raw, skin.Err.Render(line)) {
				t.Fatalf("line %d at %d columns is not %q in the error style:\n%s", 2+i, w, prefix, out)
			}
		}
		if !strings.Contains(lines[0], "observing") {
			t.Errorf("the header does not say it observes:\n%s", out)
		}
		t.Run(itoa(w), func(t *testing.T) { golden.RequireEqual(t, out) })
	}
}

// TestHeaderLagUnknownBeforeTheOutageIsKnown: a MIRRORING partition whose
// source end is not known (the first look not answered yet) makes the
// header's lag "unknown", not 0; and a mirror whose partitions are all
// stopped says its outage needs nothing of them.
func TestHeaderLagUnknownBeforeTheOutageIsKnown(t *testing.T) {
	h := NewHeader(testSkin())
	h.SetSize(160)
	snap := tuitest.Snapshot()
	for i := range snap.Mirrors[1].Partitions {
		p := &snap.Mirrors[1].Partitions[i]
		if p.State == partition.Mirroring {
			p.SourceHWM, p.Lag = -1, 0
		}
	}
	h.SetSnapshot(snap, Summarize(&snap))
	if out := ansi.Strip(h.View()); !strings.Contains(out, "lag unknown") || strings.Contains(out, "SOURCE UNREACHABLE") {
		t.Fatalf("header:\n%s", out)
	}
	snap = outageSnapshot()
	for i := range snap.Mirrors[0].Partitions {
		snap.Mirrors[0].Partitions[i].State = partition.Stopped
	}
	h.SetSnapshot(snap, Summarize(&snap))
	if out := ansi.Strip(h.View()); !strings.Contains(out, "none of its partitions needs it") || strings.Contains(out, "FAILED until") {
		t.Fatalf("header with every partition stopped:\n%s", out)
	}
}

// TestHeaderSaysWhatTheFailoverLeft: once every partition is stopped the
// header says how many source records the failover left unmirrored,
// "unknown" in the error style when the source's end was not known at the
// stop (its source was gone), never "lag 0".
func TestHeaderSaysWhatTheFailoverLeft(t *testing.T) {
	skin := testSkin()
	stopAll := func(snap *engine.Snapshot, hwm func(p *engine.PartitionSnapshot) int64) {
		for i := range snap.Mirrors {
			for j := range snap.Mirrors[i].Partitions {
				p := &snap.Mirrors[i].Partitions[j]
				p.State, p.Lag = partition.Stopped, 0
				p.SourceHWM = hwm(p)
			}
		}
	}
	for _, w := range []int{80, 160} {
		h := NewHeader(skin)
		h.SetSize(w)
		snap := outageSnapshot()
		stopAll(&snap, func(p *engine.PartitionSnapshot) int64 { return -1 })
		h.SetSnapshot(snap, Summarize(&snap))
		raw := h.View()
		out := ansi.Strip(raw)
		if strings.Contains(out, "lag 0") || strings.Contains(out, "RPO≈") || !strings.Contains(out, "20 partitions failed over, not mirrored: unknown, source gone at the stop") {
			t.Fatalf("header at %d columns, source gone at the stop:\n%s", w, out)
		}
		if !strings.Contains(raw, skin.Err.Render("unknown, source gone at the stop")) {
			t.Fatalf("the unknown loss is not in the error style at %d columns", w)
		}
		t.Run(itoa(w), func(t *testing.T) { golden.RequireEqual(t, out) })

		// The source went after the stop: what its last answers showed
		// is a lower bound.
		snap = outageSnapshot()
		stopAll(&snap, func(p *engine.PartitionSnapshot) int64 { return p.LastOffset + 2 })
		h.SetSnapshot(snap, Summarize(&snap))
		if out := ansi.Strip(h.View()); !strings.Contains(out, "20 partitions failed over, not mirrored: ≥ ") {
			t.Fatalf("header at %d columns, source gone after the stop:\n%s", w, out)
		}

		snap = tuitest.Snapshot()
		var want int64
		stopAll(&snap, func(p *engine.PartitionSnapshot) int64 {
			want += 3
			return p.LastOffset + 4 // three records beyond the last mirrored offset
		})
		h.SetSnapshot(snap, Summarize(&snap))
		if out := ansi.Strip(h.View()); !strings.Contains(out, "20 partitions failed over, not mirrored: "+groupDigits(want)+" records") {
			t.Fatalf("header at %d columns, source known at the stop (%d records behind):\n%s", w, want, out)
		}
	}
}
