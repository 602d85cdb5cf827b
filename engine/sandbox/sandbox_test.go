package sandbox

import (
	"testing"
	"time"
)

func TestRecordValueCarriesItsID(t *testing.T) {
	id := recordID("orders", SideB, 42)
	if id != "orders/B/42" {
		t.Fatalf("id %q", id)
	}
	if got := IDOf(recordValue(id, time.Unix(0, 0))); got != id {
		t.Fatalf("IDOf(recordValue(%q)) = %q", id, got)
	}
	if got := IDOf([]byte("not a demo record")); got != "" {
		t.Fatalf("IDOf of a foreign value = %q, want empty", got)
	}
}

func TestLedgerCountsPerSideAndFirstAck(t *testing.T) {
	l := newLedger()
	t0 := time.Unix(100, 0)
	l.add(Ack{ID: "a", Side: SideA, At: t0}, Ack{ID: "b", Side: SideB, At: t0.Add(time.Second)}, Ack{ID: "c", Side: SideB, At: t0.Add(2 * time.Second)})
	l.failed(SideA, 5)
	if acked, failed := l.Count(SideA); acked != 1 || failed != 5 {
		t.Fatalf("A: %d acked, %d failed", acked, failed)
	}
	if acked, _ := l.Count(SideB); acked != 2 {
		t.Fatalf("B: %d acked", acked)
	}
	if got := l.FirstAck(SideB, t0.Add(1500*time.Millisecond)); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("first B ack after 1.5s: %v", got)
	}
	if got := l.FirstAck(SideA, t0.Add(time.Second)); !got.IsZero() {
		t.Fatalf("first A ack after 1s: %v, want none", got)
	}
}

func TestIsTransactionalNamesOnlyPayments(t *testing.T) {
	for _, tp := range Topics {
		if got := IsTransactional(tp.Name); got != (tp.Name == "payments") {
			t.Errorf("IsTransactional(%s) = %v", tp.Name, got)
		}
	}
}
