package engine

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
)

func TestETA(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name                string
		done, total, before int64
		started             time.Time
		elapsed             time.Duration
		want                time.Duration
	}{
		{"a quarter in 10s leaves 30s", 250, 1000, 0, t0, 10 * time.Second, 30 * time.Second},
		{"the rate counts only what was done here", 600, 1000, 500, t0, 10 * time.Second, 40 * time.Second},
		{"nothing done yet: unknown", 0, 1000, 0, t0, 10 * time.Second, -1},
		{"nothing done here yet: unknown", 500, 1000, 500, t0, 10 * time.Second, -1},
		{"no time elapsed: unknown", 10, 1000, 0, t0, 0, -1},
		{"a clock gone backwards: unknown", 10, 1000, 0, t0, -time.Second, -1},
		{"no start: unknown", 10, 1000, 0, time.Time{}, time.Second, -1},
		{"complete", 1000, 1000, 0, t0, 10 * time.Second, 0},
		{"nothing to do", 0, 0, 0, t0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := t0.Add(c.elapsed)
			if got := ETA(c.done, c.total, c.before, c.started, now); got != c.want {
				t.Fatalf("ETA(%d of %d, %d before, %s elapsed) = %s, want %s", c.done, c.total, c.before, c.elapsed, got, c.want)
			}
		})
	}
}

// TestPartStatsProgress drives a partition's published work with a fake
// clock: allocated only while it runs, monotone, its ETA from the rate
// since it started, cleared only by its own kind.
func TestPartStatsProgress(t *testing.T) {
	clock := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := replica.NewStats("m", "t", 0)
	if p := s.Progress(clock); p != nil {
		t.Fatalf("idle partition publishes %+v", p)
	}
	s.StartWork(WorkQuarantine, "t.q", 100, 1100, clock)
	clock = clock.Add(5 * time.Second)
	s.WorkDone(WorkQuarantine, 350)
	p := s.Progress(clock)
	if p == nil || p.Done != 350 || p.Total != 1100 || p.DoneBefore != 100 || p.ETA != 15*time.Second || p.Step != "t.q" {
		t.Fatalf("progress %+v, want 350 of 1100 with ETA 15s", p)
	}
	s.WorkDone(WorkQuarantine, 200)  // a retried read
	s.WorkDone(WorkAdoption, 900)    // not the running work
	s.WorkDone(WorkQuarantine, 5000) // past the end
	if p := s.Progress(clock); p.Done != 1100 || p.ETA != 0 || p.Fraction() != 1 {
		t.Fatalf("progress %+v, want 1100 of 1100, ETA 0", p)
	}
	s.EndWork(WorkAdoption)
	if s.Progress(clock) == nil {
		t.Fatal("another kind's end cleared the quarantine copy")
	}
	s.EndWork(WorkQuarantine)
	if p := s.Progress(clock); p != nil {
		t.Fatalf("ended work still published: %+v", p)
	}
}

func TestRecordedProgress(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := store.RebuildRecord{Step: store.RebuildPlanned, Quarantine: "q", StartedAt: start, UpdatedAt: start.Add(time.Minute),
		Ranges: []store.RebuildRange{{Partition: 0, From: 10, To: 50, Copied: 40, Checked: true}, {Partition: 1, From: 5, To: 25}, {Partition: 2, From: 7, To: 7, Checked: true}}}
	now := start.Add(10 * time.Second)
	if p := recordedProgress(&rec, 0, now); p == nil || p.Kind != WorkQuarantine || p.Done != 40 || p.Total != 40 || p.ETA != 0 {
		t.Errorf("checked copy: %+v", p)
	}
	if p := recordedProgress(&rec, 1, now); p == nil || p.Done != 0 || p.Total != 20 || p.ETA != -1 {
		t.Errorf("copy not checked yet: %+v", p)
	}
	if p := recordedProgress(&rec, 2, now); p != nil {
		t.Errorf("empty range: %+v", p)
	}
	rec.Step = store.RebuildDeleted
	if p := recordedProgress(&rec, 2, now); p == nil || p.Kind != WorkRebuildStep || p.Step != "recreate" || p.Done != 1 || p.Total != 2 {
		t.Errorf("deleted: %+v", p)
	}
	rec.Step = store.RebuildDone
	if p := recordedProgress(&rec, 0, now); p != nil {
		t.Errorf("done: %+v", p)
	}
}
