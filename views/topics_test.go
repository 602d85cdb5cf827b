package views

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/tui/tuitest"
)

func TestStateSlots(t *testing.T) {
	for _, st := range partition.States {
		if int(st) >= stateSlots {
			t.Errorf("state %s is beyond stateSlots %d", st, stateSlots)
		}
	}
	codes := map[string]partition.State{}
	for _, st := range partition.States {
		if prev, ok := codes[stateCode(st)]; ok {
			t.Errorf("%s and %s share the code %q", prev, st, stateCode(st))
		}
		codes[stateCode(st)] = st
	}
}

func newTopics(t testing.TB) *Topics {
	t.Helper()
	v := NewTopics(testSkin(), keymap.New(false))
	v.SetSize(120, 30)
	snap := tuitest.Snapshot()
	v.SetSnapshot(snap)
	return v
}

func topicNames(v *Topics) []string {
	var out []string
	for _, r := range v.rows {
		out = append(out, r.topic)
	}
	return out
}

func TestTopicRowsAggregate(t *testing.T) {
	v := newTopics(t)
	if got := strings.Join(topicNames(v), " "); got != "audit-log inventory orders payments shipments telemetry" {
		t.Fatalf("rows %q", got)
	}
	var orders *topicRow
	for _, r := range v.rows {
		if r.topic == "orders" {
			orders = r
		}
	}
	if orders.parts != 6 || orders.counts[partition.Mirroring] != 4 || orders.counts[partition.Failed] != 1 || orders.counts[partition.LogAlignment] != 1 {
		t.Errorf("orders counts %+v", orders.counts)
	}
	if orders.lag != 12+250+4_200+1_521_555 || orders.lagTime.Seconds() != 84 {
		t.Errorf("orders lag %d, lag time %s", orders.lag, orders.lagTime)
	}
	if got := statesText(orders); got != "A 1 M 4 F 1" {
		t.Errorf("states %q", got)
	}
	// inventory/1 has no offsets: its lag is not known, the others' is.
	for _, r := range v.rows {
		if r.topic == "inventory" && r.lagKnown != 2 {
			t.Errorf("inventory: %d partitions with a known lag, want 2", r.lagKnown)
		}
	}
}

func TestTopicSortCycles(t *testing.T) {
	v := newTopics(t)
	want := []struct{ key, first string }{
		{"lag", "orders"}, {"lag time", "orders"}, {"ETA", "audit-log"}, {"failed", "inventory"}, {"name", "audit-log"},
	}
	for _, w := range want {
		press(v, "g", "o")
		if v.sortKey.String() != w.key || v.rows[0].topic != w.first {
			t.Errorf("sort %s: first %s, want %s %s", v.sortKey, v.rows[0].topic, w.key, w.first)
		}
	}
}

func TestTopicsEnterFilterAndActions(t *testing.T) {
	v := newTopics(t)
	press(v, "/")
	typeIn(v, "!^(orders|payments)$")
	press(v, "enter")
	if got := strings.Join(topicNames(v), " "); got != "audit-log inventory shipments telemetry" {
		t.Fatalf("!re rows %q", got)
	}
	press(v, "G")
	msgs := press(v, "enter")
	if len(msgs) != 1 || msgs[0] != (ShowTopicMsg{Mirror: tuitest.MirrorCB, Topic: "telemetry"}) {
		t.Fatalf("enter sent %+v", msgs)
	}
	assertAction(t, press(v, "p"), ActionMsg{Action: keymap.Pause, Targets: []Target{{Mirror: tuitest.MirrorCB, Topics: []string{"telemetry"}, Partitions: 2}}})
	press(v, "esc")
	if len(v.rows) != 6 {
		t.Errorf("esc left %d rows", len(v.rows))
	}
}

func TestTopicColumnsFitTheWidth(t *testing.T) {
	for _, w := range []int{80, 100, 120, 160, 240} {
		for _, mirrorW := range []int{0, 6, 12} {
			cols := topicColumns(w, mirrorW)
			total := gutterWidth
			for i, c := range cols {
				if i > 0 {
					total++
				}
				total += c.width
			}
			if total != w {
				t.Errorf("width %d mirror %d: columns take %d cells", w, mirrorW, total)
			}
			ids := map[colID]bool{}
			for _, c := range cols {
				ids[c.id] = true
			}
			for _, must := range []colID{colTopic, colParts, colStates, colLag, colLagTime, colETA} {
				if !ids[must] {
					t.Errorf("width %d: column %s missing", w, must)
				}
			}
		}
	}
}

// TestTopicsViewAt10k checks the view stays one screen and the filter and
// sort work over 10,000 partitions.
func TestTopicsViewAt10k(t *testing.T) {
	v := NewTopics(testSkin(), keymap.New(false))
	v.SetSize(160, 40)
	v.SetSnapshot(tuitest.Big(10_000))
	if len(v.rows) != 200 {
		t.Fatalf("%d topic rows, want 200", len(v.rows))
	}
	press(v, "/")
	typeIn(v, "topic-01")
	press(v, "enter", "o")
	if len(v.rows) != 100 || v.rows[0].lag < v.rows[len(v.rows)-1].lag {
		t.Fatalf("%d rows; lag sort first %d last %d", len(v.rows), v.rows[0].lag, v.rows[len(v.rows)-1].lag)
	}
	out := v.View()
	if h := strings.Count(out, "\n") + 1; h != 40 {
		t.Errorf("view is %d lines, want 40", h)
	}
	for _, l := range strings.Split(out, "\n") {
		if w := ansi.StringWidth(l); w != 160 {
			t.Fatalf("line of %d cells, want 160: %q", w, ansi.Strip(l))
		}
	}
}

func BenchmarkTopicsView10k(b *testing.B) {
	v := NewTopics(testSkin(), keymap.New(false))
	v.SetSize(160, 48)
	v.SetSnapshot(tuitest.Big(10_000))
	press(v, "G")
	b.ReportAllocs()
	for b.Loop() {
		_ = v.View()
	}
}

// BenchmarkTopicsSnapshot10k is the per-tick cost: aggregating 10,000
// partitions into topics, filtering and sorting them.
func BenchmarkTopicsSnapshot10k(b *testing.B) {
	v := NewTopics(testSkin(), keymap.New(false))
	v.SetSize(160, 48)
	snap := tuitest.Big(10_000)
	press(v, "o")
	b.ReportAllocs()
	for b.Loop() {
		v.SetSnapshot(snap)
	}
}
