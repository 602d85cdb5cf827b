package engine

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// TestLogEventLeavesOutPlaceholders: a line about no mirror, topic or
// partition carries none of those keys, rather than mirror="" or
// partition=-1; a partition's line carries all three.
func TestLogEventLeavesOutPlaceholders(t *testing.T) {
	for _, tt := range []struct {
		name string
		ev   Event
		want map[string]any // keys that must be there; every other of the three must not
	}{
		{"instance", Event{Message: "ownership", Partition: -1}, map[string]any{}},
		{"state topic", Event{Topic: "__mirror_state", Partition: -1, Message: "m"}, map[string]any{"topic": "__mirror_state"}},
		{"mirror", Event{Mirror: "a-to-b", Partition: -1, Message: "m"}, map[string]any{"mirror": "a-to-b"}},
		{"partition", Event{Mirror: "a-to-b", Topic: "orders", Partition: 0, Message: "m"},
			map[string]any{"mirror": "a-to-b", "topic": "orders", "partition": float64(0)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			logEvent(slog.New(slog.NewJSONHandler(&buf, nil)), slog.LevelInfo, tt.ev)
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%q: %v", buf.String(), err)
			}
			for _, k := range []string{"mirror", "topic", "partition"} {
				want, ok := tt.want[k]
				got, has := line[k]
				switch {
				case ok && got != want:
					t.Errorf("%s = %v, want %v in %s", k, got, want, buf.String())
				case !ok && has:
					t.Errorf("%s = %v, want no such key in %s", k, got, buf.String())
				}
			}
		})
	}
}

// TestStartupSummary: the partitions of a mirror coming up are summed up
// once the last of them got somewhere, with what each reached; a start in
// which none reached MIRRORING says nothing; a partition that stopped
// running here while coming up does not hold the summary back.
func TestStartupSummary(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	up := func(s *startups, topic string, p int32) {
		if got := s.transition(t0, "m", topic, p, partition.Unknown, partition.LogAlignment); got != nil {
			t.Fatalf("summary at LOG_ALIGNMENT of %s/%d: %+v", topic, p, got)
		}
		if got := s.transition(t0, "m", topic, p, partition.LogAlignment, partition.EpochFencing); got != nil {
			t.Fatalf("summary at EPOCH_FENCING of %s/%d: %+v", topic, p, got)
		}
	}
	var s startups
	up(&s, "orders", 0)
	up(&s, "orders", 1)
	up(&s, "clicks", 0)
	if got := s.transition(t0.Add(time.Second), "m", "orders", 0, partition.EpochFencing, partition.Mirroring); got != nil {
		t.Fatalf("summary with two partitions still coming up: %+v", got)
	}
	if got := s.transition(t0.Add(time.Second), "m", "clicks", 0, partition.EpochFencing, partition.Failed); got != nil {
		t.Fatalf("summary with one partition still coming up: %+v", got)
	}
	got := s.transition(t0.Add(1500*time.Millisecond), "m", "orders", 1, partition.EpochFencing, partition.Mirroring)
	if got == nil {
		t.Fatal("no summary once every partition got somewhere")
	}
	if want := "mirror m: 3 partitions came up in 1.5s: 2 MIRRORING, 1 FAILED"; got.message() != want {
		t.Errorf("summary %q, want %q", got.message(), want)
	}
	if got.started != 3 || got.elapsed != 1500*time.Millisecond {
		t.Errorf("started %d in %s, want 3 in 1.5s", got.started, got.elapsed)
	}

	// A retry during an outage that fails again: no summary, and the
	// next start is counted afresh.
	if s.transition(t0, "m", "clicks", 0, partition.Failed, partition.LogAlignment) != nil ||
		s.transition(t0, "m", "clicks", 0, partition.LogAlignment, partition.Failed) != nil {
		t.Fatal("summary of a start in which nothing came up")
	}
	s.transition(t0, "m", "clicks", 0, partition.Failed, partition.LogAlignment)
	s.transition(t0, "m", "orders", 0, partition.Paused, partition.LogAlignment)
	if s.gone(t0, "m", "clicks", 0) != nil {
		t.Fatal("summary while orders/0 is still coming up")
	}
	got = s.transition(t0.Add(time.Second), "m", "orders", 0, partition.LogAlignment, partition.Mirroring)
	if want := "mirror m: 2 partitions came up in 1s: 1 MIRRORING, 1 no longer run here"; got == nil || got.message() != want {
		t.Errorf("summary %+v, want %q", got, want)
	}
	// Steady MIRRORING partitions going elsewhere are no start.
	if s.transition(t0, "m", "orders", 0, partition.Mirroring, partition.Pausing) != nil {
		t.Error("summary of a pause")
	}
}

// TestBringUpSteps lists which transitions are routine steps of coming up.
func TestBringUpSteps(t *testing.T) {
	var got []string
	for _, from := range partition.States {
		for _, to := range partition.States {
			if bringUp(from, to) && to == partition.Mirroring {
				got = append(got, from.String())
			}
		}
	}
	if strings.Join(got, ",") != "LOG_ALIGNMENT,EPOCH_FENCING" {
		t.Errorf("into MIRRORING from %v, want LOG_ALIGNMENT and EPOCH_FENCING only", got)
	}
	if bringUp(partition.Mirroring, partition.Failed) || bringUp(partition.Failed, partition.Stopped) {
		t.Error("a failure or a stop counted as coming up")
	}
}
