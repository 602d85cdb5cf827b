package views

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/tui/tuitest"
)

func TestEventLogFollowsAndCaps(t *testing.T) {
	v := NewEvents(testSkin(), keymap.New(false))
	v.SetSize(100, 10)
	for i := range EventLogCap + 50 {
		v.Append(engine.Event{Time: tuitest.T0, Message: "event " + itoa(i), Partition: -1})
	}
	if v.Len() != EventLogCap {
		t.Fatalf("log keeps %d events, want %d", v.Len(), EventLogCap)
	}
	out := ansi.Strip(v.View())
	if !strings.Contains(out, "event "+itoa(EventLogCap+49)) || strings.Contains(out, "not following") {
		t.Fatalf("log does not follow the newest event:\n%s", out)
	}
	press(v, "k")
	v.Append(engine.Event{Message: "newer", Partition: -1})
	out = ansi.Strip(v.View())
	if strings.Contains(out, "newer") || !strings.Contains(out, "not following (end/G follows)") {
		t.Fatalf("scrolled-up log jumped to a new event:\n%s", out)
	}
	press(v, "G")
	if out = ansi.Strip(v.View()); !strings.Contains(out, "newer") {
		t.Fatalf("G did not return to the newest event:\n%s", out)
	}
}

func TestEventWhere(t *testing.T) {
	cases := map[string]engine.Event{
		"a-to-b":          {Mirror: "a-to-b", Partition: -1},
		"a-to-b/orders":   {Mirror: "a-to-b", Topic: "orders", Partition: -1},
		"a-to-b/orders/3": {Mirror: "a-to-b", Topic: "orders", Partition: 3},
		"-":               {Partition: -1},
	}
	for want, ev := range cases {
		if got := where(ev); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestMirrorsViewIntents(t *testing.T) {
	v := NewMirrors(testSkin(), keymap.New(false))
	v.SetSize(80, 18)
	v.SetSnapshot(tuitest.Snapshot())
	msgs := press(v, "j", "enter")
	if len(msgs) != 1 || msgs[0] != (ShowMirrorMsg{Mirror: tuitest.MirrorCB}) {
		t.Fatalf("enter emitted %+v", msgs)
	}
	assertAction(t, press(v, "p"), ActionMsg{Action: keymap.Pause, Targets: []Target{{Mirror: tuitest.MirrorCB, Partitions: 2}}})
	assertAction(t, press(v, "S"), ActionMsg{Action: keymap.StopMirror, Targets: []Target{{Mirror: tuitest.MirrorCB, Partitions: 2}}})
	if msgs := press(v, "s"); len(msgs) != 0 {
		t.Fatalf("s in the mirrors view emitted %+v (a mirror-wide stop is S)", msgs)
	}
	out := ansi.Strip(v.View())
	for _, want := range []string{"2 mirror(s) into destination dst-9Zq3kT2mQ0yK", "> c-to-b", "src-Lm8dQ1wYt5Ez (c-1.edge.example:9092)", "MIRRORING 2", "RPO≈ 36s"} {
		if !strings.Contains(out, want) {
			t.Errorf("mirrors view lacks %q:\n%s", want, out)
		}
	}
}

func TestDetailExplainsAStuckPartition(t *testing.T) {
	v := NewDetail(testSkin(), keymap.New(false))
	v.SetSize(120, 30)
	v.SetSnapshot(tuitest.Snapshot())
	v.Show(PartKey{Mirror: tuitest.MirrorAB, Topic: "inventory", Partition: 2})
	out := ansi.Strip(v.View())
	for _, want := range []string{"FAILED (was LOG_ALIGNMENT)", "destination diverged at offset 8750", "attempt 1, not retryable: waits for recover (R)"} {
		if !strings.Contains(out, want) {
			t.Errorf("detail lacks %q:\n%s", want, out)
		}
	}
	v.Show(PartKey{Mirror: tuitest.MirrorAB, Topic: "orders", Partition: 3})
	out = ansi.Strip(v.View())
	for _, want := range []string{"next retry in 4.0s (12:00:09 UTC)", "epoch 0 from 0, epoch 3 from 410, epoch 6 from 980, epoch 7 from 1205", "LME (epoch:offset)   7:1515919", "(2 filler)", "open transactions    0"} {
		if !strings.Contains(out, want) {
			t.Errorf("detail lacks %q:\n%s", want, out)
		}
	}
	assertAction(t, press(v, "s"), ActionMsg{Action: keymap.Stop, Targets: []Target{{Mirror: tuitest.MirrorAB, Topics: []string{"orders"}, Partitions: 6}}})
	if msgs := press(v, "esc"); len(msgs) != 1 || msgs[0] != (BackMsg{}) {
		t.Fatalf("esc emitted %+v", msgs)
	}
	v.Show(PartKey{Mirror: tuitest.MirrorAB, Topic: "gone", Partition: 0})
	if out = ansi.Strip(v.View()); !strings.Contains(out, "not in the latest snapshot") {
		t.Fatalf("missing partition:\n%s", out)
	}
}

func TestReadOnlyDetailDoesNotOfferRecoverKey(t *testing.T) {
	v := NewDetail(testSkin(), keymap.New(true))
	v.SetSize(120, 30)
	v.SetSnapshot(tuitest.Snapshot())
	v.Show(PartKey{Mirror: tuitest.MirrorAB, Topic: "inventory", Partition: 2})
	if out := ansi.Strip(v.View()); !strings.Contains(out, "waits for an operator recover") || strings.Contains(out, "(R)") {
		t.Fatalf("read-only detail:\n%s", out)
	}
}

func TestHeaderKeepsTheDestinationVisible(t *testing.T) {
	h := NewHeader(testSkin())
	h.SetSize(80)
	snap := tuitest.Snapshot()
	snap.Mirrors[0].Source.ID = "MkU3OEVBNTcwNTJENDM2Qk"
	snap.Mirrors[1].Source.ID = "QUJDREVGR0hJSktMTU5PUA"
	snap.Destination.ID = "4L6g3nShT-eMCtK--X86sw"
	h.SetSnapshot(snap, Summarize(&snap))
	out := ansi.Strip(h.View())
	if !strings.Contains(out, "→ destination 4L6g3nShT-eMCtK--X86sw") {
		t.Fatalf("destination cut:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if ansi.StringWidth(l) != 80 {
			t.Fatalf("header line of %d cells: %q", ansi.StringWidth(l), l)
		}
	}
	if h.Height() != 5 || !strings.Contains(out, "ULE_RECOVERY 1") || !strings.Contains(out, "RPO≈ 1m24s") {
		t.Fatalf("header (%d lines):\n%s", h.Height(), out)
	}
}

func TestSummary(t *testing.T) {
	snap := tuitest.Snapshot()
	s := Summarize(&snap)
	if s.Partitions != 20 || s.WorstLagTime != 84*time.Second || s.WorstAt != "a-to-b/orders/3" {
		t.Fatalf("summary %+v", s)
	}
	var lag int64
	for _, m := range snap.Mirrors {
		for _, p := range m.Partitions {
			lag += p.Lag
		}
	}
	if s.TotalLag != lag {
		t.Fatalf("total lag %d, want %d", s.TotalLag, lag)
	}
}
