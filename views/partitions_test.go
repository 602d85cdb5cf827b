package views

import (
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/themes"
	"github.com/kmirror/kmirror/tui/tuitest"
)

func testSkin() *Skin { return NewSkin(themes.NewPalette(themes.Dark, colorprofile.TrueColor)) }

func press(v Component, keys ...string) []tea.Msg {
	var msgs []tea.Msg
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "space":
			msg = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
		case "backspace":
			msg = tea.KeyPressMsg{Code: tea.KeyBackspace}
		default:
			msg = tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
		}
		if cmd := v.Update(msg); cmd != nil {
			msgs = append(msgs, cmd())
		}
	}
	return msgs
}

func typeIn(v Component, s string) {
	for _, r := range s {
		press(v, string(r))
	}
}

func newTable(t *testing.T, readOnly bool) *Partitions {
	t.Helper()
	v := NewPartitions(testSkin(), keymap.New(readOnly))
	v.SetSize(100, 20)
	v.SetSnapshot(tuitest.Snapshot())
	return v
}

func topicsShown(v *Partitions) []string {
	var out []string
	for _, p := range v.rows {
		out = append(out, p.Topic+"/"+itoa32(p.Partition))
	}
	return out
}

func TestFilterByRegex(t *testing.T) {
	v := newTable(t, false)
	press(v, "/")
	typeIn(v, "^pay|ship")
	press(v, "enter")
	if v.Capturing() {
		t.Fatal("enter did not close the filter prompt")
	}
	for _, s := range topicsShown(v) {
		if !strings.HasPrefix(s, "payments/") && !strings.HasPrefix(s, "shipments/") {
			t.Errorf("filter ^pay|ship shows %s", s)
		}
	}
	if len(v.rows) != 7 {
		t.Errorf("%d rows, want 7", len(v.rows))
	}
	if !strings.Contains(ansi.Strip(v.View()), "showing 7 of 20") {
		t.Errorf("info line does not count the filtered rows:\n%s", ansi.Strip(v.View()))
	}
}

func TestInvalidRegexIsAnErrorNotACrash(t *testing.T) {
	v := newTable(t, false)
	press(v, "/")
	typeIn(v, "orders")
	typeIn(v, "[")
	out := ansi.Strip(v.View())
	if !strings.Contains(out, "invalid regular expression: missing closing ]") {
		t.Fatalf("no error shown:\n%s", out)
	}
	if v.FilterText() != "orders" || len(v.rows) != 6 {
		t.Errorf("an invalid expression replaced the filter: %q, %d rows", v.FilterText(), len(v.rows))
	}
	press(v, "enter")
	if !v.Capturing() {
		t.Error("enter accepted an invalid expression")
	}
	press(v, "backspace", "enter")
	if v.Capturing() || v.FilterText() != "orders" {
		t.Errorf("after fixing: capturing=%v filter=%q", v.Capturing(), v.FilterText())
	}
}

func TestEscRestoresTheFilterBeingEdited(t *testing.T) {
	v := newTable(t, false)
	press(v, "/")
	typeIn(v, "orders")
	press(v, "enter", "/")
	typeIn(v, "x")
	press(v, "esc")
	if v.FilterText() != "orders" {
		t.Fatalf("esc left filter %q, want orders", v.FilterText())
	}
	press(v, "esc") // not editing: clears
	if v.FilterText() != "" || len(v.rows) != 20 {
		t.Fatalf("esc did not clear the filter: %q, %d rows", v.FilterText(), len(v.rows))
	}
}

func TestSortCyclesTopicLagState(t *testing.T) {
	v := newTable(t, false)
	if v.rows[0].Topic != "audit-log" {
		t.Fatalf("topic sort starts with %s", v.rows[0].Topic)
	}
	press(v, "o")
	if v.sortKey != SortLag || v.rows[0].Topic != "orders" || v.rows[0].Partition != 5 {
		t.Fatalf("lag sort: key %s, first %s/%d", v.sortKey, v.rows[0].Topic, v.rows[0].Partition)
	}
	for i := 1; i < len(v.rows); i++ {
		if v.rows[i].Lag > v.rows[i-1].Lag {
			t.Fatalf("lag sort not descending at %d", i)
		}
	}
	press(v, "o")
	if v.sortKey != SortState || v.rows[0].State != partition.Failed {
		t.Fatalf("state sort: key %s, first %s", v.sortKey, v.rows[0].State)
	}
	press(v, "o")
	if v.sortKey != SortTopic {
		t.Fatalf("sort did not cycle back to topic: %s", v.sortKey)
	}
}

func TestCursorFollowsThePartitionAcrossSortsAndSnapshots(t *testing.T) {
	v := newTable(t, false)
	press(v, "j", "j", "j", "j", "j", "j", "j", "j") // orders/3
	want, _ := v.Selected()
	if want.Topic != "orders" || want.Partition != 3 {
		t.Fatalf("selected %+v", want)
	}
	press(v, "o", "o")
	v.SetSnapshot(tuitest.Snapshot())
	if got, _ := v.Selected(); got != want {
		t.Fatalf("cursor moved to %+v", got)
	}
}

func TestActionsTargetMarkedTopicsOrTheCursorRow(t *testing.T) {
	v := newTable(t, false)
	msgs := press(v, "p")
	want := ActionMsg{Action: keymap.Pause, Targets: []Target{{Mirror: tuitest.MirrorAB, Topics: []string{"audit-log"}, Partitions: 2}}}
	assertAction(t, msgs, want)

	// Mark orders/0 and payments/2, and telemetry/0 of the other mirror.
	press(v, "j", "j", "j", "j", "j", "space")
	press(v, "j", "j", "j", "j", "j", "j", "space")
	press(v, "j", "j", "j", "j", "j", "space")
	msgs = press(v, "s")
	want = ActionMsg{Action: keymap.Stop, Targets: []Target{
		{Mirror: tuitest.MirrorAB, Topics: []string{"orders", "payments"}, Partitions: 10},
		{Mirror: tuitest.MirrorCB, Topics: []string{"telemetry"}, Partitions: 2},
	}}
	assertAction(t, msgs, want)

	msgs = press(v, "S")
	assertAction(t, msgs, ActionMsg{Action: keymap.StopMirror, Targets: []Target{{Mirror: tuitest.MirrorCB, Partitions: 2}}})
}

func assertAction(t *testing.T, msgs []tea.Msg, want ActionMsg) {
	t.Helper()
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1: %+v", len(msgs), msgs)
	}
	got, ok := msgs[0].(ActionMsg)
	if !ok {
		t.Fatalf("got %T", msgs[0])
	}
	if got.Action != want.Action || len(got.Targets) != len(want.Targets) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want.Targets {
		g, w := got.Targets[i], want.Targets[i]
		if g.Mirror != w.Mirror || g.Partitions != w.Partitions || strings.Join(g.Topics, ",") != strings.Join(w.Topics, ",") || g.Whole() != w.Whole() {
			t.Fatalf("target %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestReadOnlyTableSendsNoActions(t *testing.T) {
	v := newTable(t, true)
	if msgs := press(v, "p", "r", "R", "B", "s", "S"); len(msgs) != 0 {
		t.Fatalf("read-only table emitted %+v", msgs)
	}
}

func TestMarksOfVanishedPartitionsAreDropped(t *testing.T) {
	v := newTable(t, false)
	press(v, "space")
	if v.Marked() != 1 {
		t.Fatal("space did not mark")
	}
	snap := tuitest.Snapshot()
	snap.Mirrors[0].Partitions = snap.Mirrors[0].Partitions[2:] // audit-log gone
	v.SetSnapshot(snap)
	if v.Marked() != 0 {
		t.Fatalf("%d marks survive a deleted topic", v.Marked())
	}
}

func TestViewRendersOnlyTheRowsThatFit(t *testing.T) {
	v := NewPartitions(testSkin(), keymap.New(false))
	v.SetSize(120, 30)
	v.SetSnapshot(tuitest.Big(10_000))
	out := v.View()
	if h := strings.Count(out, "\n") + 1; h != 30 {
		t.Fatalf("view is %d lines, want 30", h)
	}
	for _, l := range strings.Split(ansi.Strip(out), "\n") {
		if w := ansi.StringWidth(l); w != 120 {
			t.Fatalf("line is %d cells, want 120: %q", w, l)
		}
	}
	if !strings.Contains(ansi.Strip(out), "showing 10,000 of 10,000") {
		t.Fatal("info line does not count 10,000 rows")
	}
	press(v, "G")
	if last := ansi.Strip(out); !strings.Contains(ansi.Strip(v.View()), "topic-0199") || last == ansi.Strip(v.View()) {
		t.Fatal("end did not scroll to the last topic")
	}
}

func TestColumnsFitTheWidth(t *testing.T) {
	for _, w := range []int{80, 100, 120, 160, 240} {
		for _, mirrorW := range []int{0, 6, 12} {
			cols := partitionColumns(w, mirrorW)
			total := gutterWidth
			for i, c := range cols {
				if i > 0 {
					total++
				}
				total += c.width
			}
			if total != w && w >= 80 {
				t.Errorf("width %d mirror %d: columns take %d cells", w, mirrorW, total)
			}
			for _, must := range []colID{colTopic, colPartition, colState, colSrcOffset, colDstOffset, colLag, colLagTime} {
				found := false
				for _, c := range cols {
					found = found || c.id == must
				}
				if !found {
					t.Errorf("width %d: column %s missing", w, must)
				}
			}
		}
	}
	// The epochs stay at 80 columns with several mirrors (the MIRROR
	// column shown), whatever the mirror names' length.
	for _, mirrorW := range []int{0, 6, 12} {
		cols := partitionColumns(80, mirrorW)
		if !slices.ContainsFunc(cols, func(c column) bool { return c.id == colEpoch }) {
			t.Errorf("80 columns, mirror column %d: no EPOCH in %v", mirrorW, cols)
		}
	}
	if n := len(partitionColumns(160, 6)); n != 12 {
		t.Errorf("160 columns show %d columns, want all 12", n)
	}
}

func BenchmarkPartitionsView10k(b *testing.B) {
	v := NewPartitions(testSkin(), keymap.New(false))
	v.SetSize(160, 48)
	v.SetSnapshot(tuitest.Big(10_000))
	press(v, "G") // render the far end, not the cheap first page
	b.ReportAllocs()
	for b.Loop() {
		_ = v.View()
	}
}

// BenchmarkPartitionsSnapshot10k is the per-tick cost: filtering and
// sorting 10,000 partitions when a new snapshot arrives.
func BenchmarkPartitionsSnapshot10k(b *testing.B) {
	v := NewPartitions(testSkin(), keymap.New(false))
	v.SetSize(160, 48)
	snap := tuitest.Big(10_000)
	press(v, "/")
	typeIn(v, "topic-0(0|1)")
	press(v, "enter", "o") // lag sort
	b.ReportAllocs()
	for b.Loop() {
		v.SetSnapshot(snap)
	}
}

// TestObserverRatesAreRecordRates: an observer counts offsets, not bytes,
// so its rows and summaries give records per second — also at zero, where
// "0 B/s" would claim a byte count it never made.
func TestObserverRatesAreRecordRates(t *testing.T) {
	snap := tuitest.Snapshot()
	snap.Observer = true
	for i := range snap.Mirrors[0].Partitions {
		p := &snap.Mirrors[0].Partitions[i]
		p.BytesPerSec, p.BatchesPerSec, p.RecordsPerSec = 0, 0, 0
	}
	snap.Mirrors[0].Partitions[0].RecordsPerSec = 42
	v := NewPartitions(testSkin(), keymap.New(false))
	v.SetSize(160, 30)
	v.SetSnapshot(snap)
	out := ansi.Strip(v.View())
	if strings.Contains(out, "B/s") || !strings.Contains(out, "42 rec/s") || !strings.Contains(out, "0 rec/s") {
		t.Fatalf("observer rows:\n%s", out)
	}
	m := NewMirrors(testSkin(), keymap.New(false))
	m.SetSize(160, 30)
	m.SetSnapshot(snap)
	if out := ansi.Strip(m.View()); strings.Contains(out, "MB/s") || !strings.Contains(out, "42 rec/s into the destination") {
		t.Fatalf("observer mirror summary:\n%s", out)
	}
}
