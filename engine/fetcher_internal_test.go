package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/engine/partition"
)

// TestDeliverKeepsNewestAnswer: an answer to an abandoned want never
// replaces an unread answer to its successor, whatever order they arrive
// in; an unread older answer is replaced by a newer one.
func TestDeliverKeepsNewestAnswer(t *testing.T) {
	r := &runner{in: inbox{wake: make(chan struct{}, 1)}}
	take := func() fetchResult {
		t.Helper()
		select {
		case <-r.in.wake:
		default:
			t.Fatal("an answer left no wake token")
		}
		var res fetchResult
		if !r.takeResult(&res) {
			t.Fatal("no answer waiting")
		}
		return res
	}
	r.deliver(fetchResult{gen: 2, offset: 20})
	r.deliver(fetchResult{gen: 1, offset: 10}) // late answer to the abandoned want
	if got := take(); got.gen != 2 || got.offset != 20 {
		t.Fatalf("got the answer to gen %d at %d, want gen 2 at 20", got.gen, got.offset)
	}
	r.deliver(fetchResult{gen: 3, offset: 30})
	r.deliver(fetchResult{gen: 4, offset: 40})
	if got := take(); got.gen != 4 {
		t.Fatalf("got the answer to gen %d, want 4", got.gen)
	}
	var res fetchResult
	if r.takeResult(&res) {
		t.Fatalf("an answer taken twice: %+v", res)
	}
}

// TestInboxWakesForEverything: events, failures and answers each leave a
// wake token; events come out in order, and a waiter that takes one event
// while more wait leaves a token for the rest.
func TestInboxWakesForEverything(t *testing.T) {
	r := &runner{in: inbox{wake: make(chan struct{}, 1)}}
	woken := func() bool {
		select {
		case <-r.in.wake:
			return true
		default:
			return false
		}
	}
	r.send(partition.Pause{})
	r.send(partition.Resume{})
	if !woken() {
		t.Fatal("send left no wake token")
	}
	if ev, ok := r.takeEvent(); !ok || ev != (partition.Pause{}) {
		t.Fatalf("first event %v, want Pause", ev)
	}
	if !woken() {
		t.Fatal("taking one of two events left no token for the second")
	}
	if ev, ok := r.takeEvent(); !ok || ev != (partition.Resume{}) {
		t.Fatalf("second event %v, want Resume", ev)
	}
	r.inject(errors.New("first"))
	r.inject(errors.New("second"))
	if !woken() {
		t.Fatal("inject left no wake token")
	}
	if err := r.takeFault(); err == nil || err.Error() != "first" {
		t.Fatalf("fault %v, want the first", err)
	}
	if err := r.takeFault(); err != nil {
		t.Fatalf("fault taken twice: %v", err)
	}
	ctx, cancel := r.startWork(context.Background())
	defer cancel()
	r.send(partition.Stop{})
	if ctx.Err() == nil {
		t.Fatal("an event did not interrupt the work in progress")
	}
	r.endWork(cancel)
	r.takeEvent()

	// The end of the runner's context ends its work, which is not a
	// child of that context, and wakes it.
	parent, end := context.WithCancel(context.Background())
	ctx, cancel = r.startWork(parent)
	woken()
	end()
	r.contextEnded()
	if ctx.Err() == nil || !woken() {
		t.Fatalf("the end of the runner's context left its work running (%v) or the runner asleep", ctx.Err())
	}
	r.endWork(cancel)
	ctx, cancel = r.startWork(parent)
	if ctx.Err() == nil {
		t.Fatal("work started under an ended context is not cancelled")
	}
	r.endWork(cancel)
	r.markExited()
	r.send(partition.Start{})
	if r.eventPending() {
		t.Fatal("an event sent after exit was kept")
	}
}

// TestSplitBehind: partitions with data waiting are fetched apart from the
// caught-up ones, and neither list shares memory with the input.
func TestSplitBehind(t *testing.T) {
	a0, a1, b0 := &runner{topic: "a"}, &runner{topic: "a", partition: 1}, &runner{topic: "b"}
	in := []want{
		{to: a0, partition: 0, behind: true},
		{to: a1, partition: 1},
		{to: b0, partition: 0, behind: true},
	}
	behind, rest := splitBehind(in)
	if len(behind) != 2 || behind[0].topic() != "a" || behind[1].topic() != "b" || len(rest) != 1 || rest[0].partition != 1 {
		t.Fatalf("splitBehind = %v, %v", behind, rest)
	}
	behind[0].offset = 99
	if in[0].offset != 0 {
		t.Fatal("behind shares the input's array")
	}
	if b, r := splitBehind(rest); b != nil || len(r) != 1 {
		t.Fatalf("nothing behind: got %v, %v", b, r)
	}
}

// TestWantQueueOnePerPartition: the newest want of a partition replaces
// an older one still waiting, so one request never asks for a partition
// twice; behind wants are taken apart from the caught-up ones.
func TestWantQueueOnePerPartition(t *testing.T) {
	var q wantQueue
	a0, a1 := &runner{topic: "a"}, &runner{topic: "a", partition: 1}
	q.add(want{to: a0, partition: 0, gen: 1})
	q.add(want{to: a1, partition: 1, gen: 1, behind: true})
	q.add(want{to: a0, partition: 0, gen: 2})
	if q.len() != 2 {
		t.Fatalf("queue holds %d wants, want 2", q.len())
	}
	if b := q.takeBehind(); len(b) != 1 || b[0].partition != 1 {
		t.Fatalf("takeBehind = %v", b)
	}
	q.add(want{to: a0, partition: 0, gen: 3})
	all := q.takeAll()
	if len(all) != 1 || all[0].gen != 3 {
		t.Fatalf("takeAll = %v, want only gen 3 of a/0", all)
	}
	if q.len() != 0 || q.takeBehind() != nil {
		t.Fatal("queue not empty after takeAll")
	}
	q.add(want{to: a0, partition: 0, gen: 4})
	if all := q.takeAll(); len(all) != 1 || all[0].gen != 4 {
		t.Fatalf("after takeAll, takeAll = %v", all)
	}

	// The topic was removed and added again: a new runner for a/0 while
	// the old one's want still waits. The old runner has exited.
	a0.markExited()
	again := &runner{topic: "a"}
	q.add(want{to: a0, partition: 0, gen: 5, behind: true})
	q.add(want{to: again, partition: 0, gen: 1, behind: true})
	if b := q.takeBehind(); len(b) != 1 || b[0].to != again {
		t.Fatalf("takeBehind = %v, want only the new runner's want", b)
	}
	q.add(want{to: a0, partition: 0, gen: 6})
	q.add(want{to: again, partition: 0, gen: 2})
	if all := q.takeAll(); len(all) != 1 || all[0].to != again {
		t.Fatalf("takeAll = %v, want only the new runner's want", all)
	}
}

// TestFetchRequestIndex: a Fetch request lists each topic once with its
// partitions, and every partition of the answer, named by topic or (v13+)
// by topic id, finds the want that asked for it; a partition or topic not
// asked for finds none.
func TestFetchRequestIndex(t *testing.T) {
	idA, idB := [16]byte{1}, [16]byte{2}
	var wants []want
	for _, w := range []struct {
		topic string
		id    [16]byte
		p     int32
	}{{"a", idA, 3}, {"b", idB, 0}, {"a", idA, 1}, {"b", idB, 7}} {
		wants = append(wants, want{to: &runner{topic: w.topic, partition: w.p}, topicID: w.id, partition: w.p, offset: int64(10 * w.p)})
	}
	req, idx := fetchRequest(fetchJob{wants: wants, maxWait: 100})
	if len(req.Topics) != 2 || req.Topics[0].Topic != "a" || req.Topics[0].TopicID != idA || len(req.Topics[0].Partitions) != 2 ||
		req.Topics[1].Topic != "b" || len(req.Topics[1].Partitions) != 2 || req.Topics[1].Partitions[1].FetchOffset != 70 {
		t.Fatalf("request topics %+v", req.Topics)
	}
	for j, w := range wants {
		for _, by := range []struct {
			name string
			id   [16]byte
		}{{w.topic(), [16]byte{}}, {"", w.topicID}} {
			got, name, ok := idx.find(by.name, by.id, w.partition)
			if !ok || got != j || name != w.topic() {
				t.Errorf("find(%q, %v, %d) = %d %q %v, want %d %q", by.name, by.id[0], w.partition, got, name, ok, j, w.topic())
			}
		}
	}
	for _, miss := range []struct {
		name string
		id   [16]byte
		p    int32
	}{{"a", idA, 2}, {"a", idA, 4}, {"a", idA, -1}, {"c", [16]byte{}, 0}, {"", [16]byte{9}, 0}} {
		if j, _, ok := idx.find(miss.name, miss.id, miss.p); ok {
			t.Errorf("find(%q, %v, %d) found want %d, asked for none", miss.name, miss.id[0], miss.p, j)
		}
	}
}

// TestFetchClientIDFormat: the client id names instance, fetcher and mirror.
func TestFetchClientIDFormat(t *testing.T) {
	if got := fetchClientID("east-1", 2, "a-to-b"); got != "kmirror-east-1-2-a-to-b" {
		t.Fatalf("fetchClientID = %q", got)
	}
}

func TestFetchRequestLimits(t *testing.T) {
	if req, _ := fetchRequest(fetchJob{maxWait: 100}); req.MinBytes != 1 || req.MaxBytes != 64<<20 {
		t.Fatalf("defaults: min %d max %d", req.MinBytes, req.MaxBytes)
	}
	req, _ := fetchRequest(fetchJob{maxWait: 100, limits: fetchLimits{minBytes: 1024, maxBytes: 1 << 20}})
	if req.MinBytes != 1024 || req.MaxBytes != 1<<20 {
		t.Fatalf("mirror.fetch.min.bytes/response.max.bytes: min %d max %d", req.MinBytes, req.MaxBytes)
	}
}
