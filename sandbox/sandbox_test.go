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

func TestLedgerKeepsUnacknowledgedWrites(t *testing.T) {
	l := newLedger()
	l.notAcked(true, Unacked{ID: "orders/A/1", Topic: "orders", Side: SideA})
	l.notAcked(false, Unacked{ID: "payments/A/1", Topic: "payments", Side: SideA, InTxn: true}, Unacked{ID: "payments/A/2", Topic: "payments", Side: SideA, InTxn: true})
	if _, failed := l.Count(SideA); failed != 1 {
		t.Fatalf("%d failed attempts, want 1: an intended abort is not a failure", failed)
	}
	txn := l.Unacked(func(u *Unacked) bool { return u.InTxn })
	if len(txn) != 2 || txn[0].ID != "payments/A/1" || len(l.Unacked(nil)) != 3 {
		t.Fatalf("unacknowledged in transactions %+v, all %d", txn, len(l.Unacked(nil)))
	}
}

func TestBandwidthText(t *testing.T) {
	for in, want := range map[int64]string{0: "no bandwidth cap", 512 << 10: "512 KiB/s", 2 << 20: "2 MiB/s", 1500: "1500 B/s"} {
		if got := BandwidthText(in); got != want {
			t.Errorf("BandwidthText(%d) = %q, want %q", in, got, want)
		}
	}
}
