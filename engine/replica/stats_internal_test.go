package replica

import (
	"testing"
	"time"
)

// TestRateFromCounters: the first update after a partition starts only
// takes its counters; later ones divide what was appended since by the
// time since the mirror's last update.
func TestRateFromCounters(t *testing.T) {
	s := NewStats("a-to-b", "t", 0)
	s.appended(0, 10, 0, 4000, 0, false)
	s.UpdateRate(0)
	if ps := s.Snapshot(); ps.BytesPerSec != 0 || ps.BatchesPerSec != 0 {
		t.Fatalf("rate %v B/s, %v batches/s at the first update, want none", ps.BytesPerSec, ps.BatchesPerSec)
	}
	s.appended(10, 20, 0, 3000, 0, false)
	s.appended(20, 30, 0, 3000, 0, false)
	s.UpdateRate(2 * time.Second)
	if ps := s.Snapshot(); ps.BytesPerSec != 3000 || ps.BatchesPerSec != 1 {
		t.Fatalf("rate %v B/s, %v batches/s, want 3000 and 1", ps.BytesPerSec, ps.BatchesPerSec)
	}
	s.UpdateRate(time.Second)
	if ps := s.Snapshot(); ps.BytesPerSec != 0 {
		t.Fatalf("rate %v B/s with nothing appended, want 0", ps.BytesPerSec)
	}
}
