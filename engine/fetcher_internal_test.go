package engine

import "testing"

// TestDeliverKeepsNewestAnswer: an answer to an abandoned want never
// replaces an unread answer to its successor, whatever order they arrive
// in; an unread older answer is replaced by a newer one.
func TestDeliverKeepsNewestAnswer(t *testing.T) {
	ch := make(chan fetchResult, 1)
	deliver(ch, fetchResult{gen: 2, offset: 20})
	deliver(ch, fetchResult{gen: 1, offset: 10}) // late answer to the abandoned want
	if got := <-ch; got.gen != 2 || got.offset != 20 {
		t.Fatalf("got the answer to gen %d at %d, want gen 2 at 20", got.gen, got.offset)
	}
	deliver(ch, fetchResult{gen: 3, offset: 30})
	deliver(ch, fetchResult{gen: 4, offset: 40})
	if got := <-ch; got.gen != 4 {
		t.Fatalf("got the answer to gen %d, want 4", got.gen)
	}
}

// TestSplitBehind: partitions with data waiting are fetched apart from the
// caught-up ones, and neither list shares memory with the input.
func TestSplitBehind(t *testing.T) {
	in := []want{
		{topic: "a", partition: 0, behind: true},
		{topic: "a", partition: 1},
		{topic: "b", partition: 0, behind: true},
	}
	behind, rest := splitBehind(in)
	if len(behind) != 2 || behind[0].topic != "a" || behind[1].topic != "b" || len(rest) != 1 || rest[0].partition != 1 {
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
	q.add(want{topic: "a", partition: 0, gen: 1})
	q.add(want{topic: "a", partition: 1, gen: 1, behind: true})
	q.add(want{topic: "a", partition: 0, gen: 2})
	if q.len() != 2 {
		t.Fatalf("queue holds %d wants, want 2", q.len())
	}
	if b := q.takeBehind(); len(b) != 1 || b[0].partition != 1 {
		t.Fatalf("takeBehind = %v", b)
	}
	q.add(want{topic: "a", partition: 0, gen: 3})
	all := q.takeAll()
	if len(all) != 1 || all[0].gen != 3 {
		t.Fatalf("takeAll = %v, want only gen 3 of a/0", all)
	}
	if q.len() != 0 || q.takeBehind() != nil {
		t.Fatal("queue not empty after takeAll")
	}
	q.add(want{topic: "a", partition: 0, gen: 4})
	if all := q.takeAll(); len(all) != 1 || all[0].gen != 4 {
		t.Fatalf("after takeAll, takeAll = %v", all)
	}
}

// TestFetchClientIDFormat: the client id names instance, fetcher and mirror.
func TestFetchClientIDFormat(t *testing.T) {
	if got := fetchClientID("east-1", 2, "a-to-b"); got != "kmirror-east-1-2-a-to-b" {
		t.Fatalf("fetchClientID = %q", got)
	}
}
