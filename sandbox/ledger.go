package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Side names the cluster a record was written to.
type Side string

// The demo's two sides.
const (
	SideA Side = "A"
	SideB Side = "B"
)

// Ack is one record a cluster acknowledged to a demo producer: where it
// landed and when. For transactional topics only records of committed
// transactions are acknowledged.
type Ack struct {
	ID        string // unique record id, also carried in the record value
	Topic     string
	Partition int32
	Offset    int64
	At        time.Time
	Side      Side
}

// Unacked is a record a demo producer wrote, or tried to, that no cluster
// acknowledged: its produce failed or was abandoned when the producers
// stopped, or its transaction was not acknowledged as committed (aborted
// on purpose, every fourth one, or its commit failed or was cut off). A
// cluster may hold it all the same: a write whose answer an outage cut
// off, or an aborted transaction's records.
type Unacked struct {
	ID    string
	Topic string
	Side  Side
	InTxn bool // part of a transaction, not a single produce
}

// Ledger keeps every acknowledged record, and every record written that
// was not acknowledged. It is what makes the drill's RPO exact: the
// producers' own acks, not an estimate from lag; and it tells a record a
// cluster holds without having acknowledged it from one it lost.
type Ledger struct {
	mu      sync.Mutex
	acks    []Ack
	unacked []Unacked
	fail    map[Side]int64 // produce attempts that were not acknowledged
}

func newLedger() *Ledger { return &Ledger{fail: map[Side]int64{}} }

// notAcked notes records that were not acknowledged; failed counts them
// as failed attempts too unless they were aborted on purpose.
func (l *Ledger) notAcked(failed bool, u ...Unacked) {
	l.mu.Lock()
	l.unacked = append(l.unacked, u...)
	if failed {
		for _, x := range u {
			l.fail[x.Side]++
		}
	}
	l.mu.Unlock()
}

// Unacked returns a copy of the records written without acknowledgement
// that match keep (all when keep is nil).
func (l *Ledger) Unacked(keep func(*Unacked) bool) []Unacked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return kept(l.unacked, keep)
}

func (l *Ledger) add(a ...Ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a...)
	l.mu.Unlock()
}

func (l *Ledger) failed(s Side, n int64) {
	l.mu.Lock()
	l.fail[s] += n
	l.mu.Unlock()
}

// Acks returns a copy of the acknowledged records that match keep (all when
// keep is nil).
func (l *Ledger) Acks(keep func(*Ack) bool) []Ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return kept(l.acks, keep)
}

// kept copies the items that match keep (all when keep is nil).
func kept[T any](items []T, keep func(*T) bool) []T {
	out := make([]T, 0, len(items))
	for i := range items {
		if keep == nil || keep(&items[i]) {
			out = append(out, items[i])
		}
	}
	return out
}

// Count returns how many records side acknowledged, and how many produce
// attempts to it failed or were abandoned.
func (l *Ledger) Count(s Side) (acked, failed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.acks {
		if l.acks[i].Side == s {
			acked++
		}
	}
	return acked, l.fail[s]
}

// FirstAck returns the time side first acknowledged a record at or after
// since (zero when none yet).
func (l *Ledger) FirstAck(s Side, since time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.acks {
		if a := &l.acks[i]; a.Side == s && !a.At.Before(since) {
			return a.At
		}
	}
	return time.Time{}
}

// recordID builds the id a record carries; Value embeds it so any reader of
// either cluster can tell which acknowledged write a record is.
func recordID(topic string, s Side, n int64) string { return fmt.Sprintf("%s/%s/%d", topic, s, n) }

// recordValue is the value of a demo record.
func recordValue(id string, at time.Time) []byte {
	return fmt.Appendf(nil, `{"id":%q,"at":%q}`, id, at.UTC().Format(time.RFC3339Nano))
}

// IDOf extracts the record id from a demo record value ("" when it is not
// one).
func IDOf(value []byte) string {
	v := string(value)
	const pre = `{"id":"`
	if !strings.HasPrefix(v, pre) {
		return ""
	}
	v = v[len(pre):]
	if i := strings.IndexByte(v, '"'); i >= 0 {
		return v[:i]
	}
	return ""
}
