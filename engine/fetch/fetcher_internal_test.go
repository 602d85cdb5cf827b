package fetch

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// receiver is a partition's runner as the fetcher sees it.
type receiver struct {
	topic   string
	exited  bool
	answers []Result
	hwm     int64 // the last SetSource
}

func (r *receiver) Topic() string          { return r.topic }
func (r *receiver) Deliver(res Result)     { r.answers = append(r.answers, res) }
func (r *receiver) Exited() bool           { return r.exited }
func (r *receiver) SetSource(hwm, _ int64) { r.hwm = hwm }

// TestSplitBehind: partitions with data waiting are fetched apart from the
// caught-up ones, and neither list shares memory with the input.
func TestSplitBehind(t *testing.T) {
	a0, a1, b0 := &receiver{topic: "a"}, &receiver{topic: "a"}, &receiver{topic: "b"}
	in := []Want[*receiver]{
		{To: a0, Partition: 0, Behind: true},
		{To: a1, Partition: 1},
		{To: b0, Partition: 0, Behind: true},
	}
	behind, rest := splitBehind(in)
	if len(behind) != 2 || behind[0].topic() != "a" || behind[1].topic() != "b" || len(rest) != 1 || rest[0].Partition != 1 {
		t.Fatalf("splitBehind = %v, %v", behind, rest)
	}
	behind[0].Offset = 99
	if in[0].Offset != 0 {
		t.Fatal("behind shares the input's array")
	}
	if b, r := splitBehind(rest); b != nil || len(r) != 1 {
		t.Fatalf("nothing behind: got %v, %v", b, r)
	}
}

// TestNextJobKeepsAConnectionForTheSession: partitions behind take free
// connections first, but not the last one while a session request is due:
// three slow Fetches of partitions behind, a fourth queued, and the idle
// partitions' session still gets the fourth connection. With no session
// due, or more than one connection free, the partitions behind go first;
// long-polls never take the last connection.
func TestNextJobKeepsAConnectionForTheSession(t *testing.T) {
	f := &Fetcher[*receiver]{sess: newSession[*receiver](), maxWait: 100}
	var q wantQueue[*receiver]
	behind := func() { q.add(Want[*receiver]{To: &receiver{topic: "busy"}, Partition: 3, Behind: true}) }
	threeBusy := []bool{true, true, true, false}

	// No session due: the partition behind takes the last connection.
	behind()
	if job, poll, ok := f.nextJob(&q, threeBusy, 0); !ok || poll || len(job.wants) != 1 {
		t.Fatalf("no session: nextJob = %+v, poll %v, ok %v; want the partition behind", job, poll, ok)
	}

	// A session member (an idle partition): the last connection is its.
	f.sess.park(Want[*receiver]{To: &receiver{topic: "live"}, Partition: 0})
	behind()
	job, poll, ok := f.nextJob(&q, threeBusy, 0)
	if !ok || !poll || !job.session {
		t.Fatalf("session due, one connection free: nextJob = %+v, poll %v, ok %v; want the session request", job, poll, ok)
	}
	if q.len() != 1 {
		t.Fatal("the partition behind did not stay queued")
	}
	// Two connections free: the partition behind goes first.
	if job, poll, ok := f.nextJob(&q, []bool{true, true, false, false}, 1); !ok || poll || len(job.wants) != 1 {
		t.Fatalf("two connections free: nextJob = %+v, poll %v, ok %v; want the partition behind", job, poll, ok)
	}
	// Three long-polls already: a session request due does not take the
	// last connection either.
	f.sess.park(Want[*receiver]{To: &receiver{topic: "live"}, Partition: 1})
	if _, _, ok := f.nextJob(&q, threeBusy, conns-1); ok {
		t.Fatal("with three long-polls out, the last connection went to a fourth")
	}
}

// TestSessionLongPollGrowsWithItsMembers: a session request long-polls
// fetch.wait.max.ms while the session is small, longer as its idle
// partitions grow (the broker reads them all for each request), and never
// more than maxSessionWait.
func TestSessionLongPollGrowsWithItsMembers(t *testing.T) {
	f := &Fetcher[*receiver]{sess: newSession[*receiver](), maxWait: 100}
	park := func(n int) {
		for range n {
			f.sess.park(Want[*receiver]{To: &receiver{topic: "idle"}, Partition: int32(f.sess.size())})
		}
	}
	sessionWait := func() int32 {
		t.Helper()
		var q wantQueue[*receiver]
		job, poll, ok := f.nextJob(&q, []bool{false, false, false, false}, 0)
		if !ok || !poll || !job.session {
			t.Fatalf("nextJob = %+v, poll %v, ok %v; want the session request", job, poll, ok)
		}
		f.sess.polling = false // answered
		return job.maxWait
	}
	for _, c := range []struct {
		members int
		want    int32
	}{
		{1, 100},
		{5_000, 100},   // 5,000 × 20µs: the fetcher's own 100ms
		{20_000, 400},  // 20,000 × 20µs
		{50_000, 1000}, // the ceiling
		{200_000, 1000},
	} {
		park(c.members - f.sess.size())
		if got := sessionWait(); got != c.want {
			t.Errorf("%d members: the session long-polls %dms, want %dms", c.members, got, c.want)
		}
	}
	// A fetcher configured above the scaled wait keeps its own.
	f.maxWait = 5000
	if got := sessionWait(); got != 5000 {
		t.Errorf("fetch.wait.max.ms 5000: the session long-polls %dms", got)
	}
}

// TestWantQueueOnePerPartition: the newest want of a partition replaces
// an older one still waiting, so one request never asks for a partition
// twice; behind wants are taken apart from the caught-up ones.
func TestWantQueueOnePerPartition(t *testing.T) {
	var q wantQueue[*receiver]
	a0, a1 := &receiver{topic: "a"}, &receiver{topic: "a"}
	q.add(Want[*receiver]{To: a0, Partition: 0, Gen: 1})
	q.add(Want[*receiver]{To: a1, Partition: 1, Gen: 1, Behind: true})
	q.add(Want[*receiver]{To: a0, Partition: 0, Gen: 2})
	if q.len() != 2 {
		t.Fatalf("queue holds %d wants, want 2", q.len())
	}
	if b := q.takeBehind(); len(b) != 1 || b[0].Partition != 1 {
		t.Fatalf("takeBehind = %v", b)
	}
	q.add(Want[*receiver]{To: a0, Partition: 0, Gen: 3})
	all := q.takeAll()
	if len(all) != 1 || all[0].Gen != 3 {
		t.Fatalf("takeAll = %v, want only gen 3 of a/0", all)
	}
	if q.len() != 0 || q.takeBehind() != nil {
		t.Fatal("queue not empty after takeAll")
	}
	q.add(Want[*receiver]{To: a0, Partition: 0, Gen: 4})
	if all := q.takeAll(); len(all) != 1 || all[0].Gen != 4 {
		t.Fatalf("after takeAll, takeAll = %v", all)
	}

	// The topic was removed and added again: a new runner for a/0 while
	// the old one's want still waits. The old runner has exited.
	a0.exited = true
	again := &receiver{topic: "a"}
	q.add(Want[*receiver]{To: a0, Partition: 0, Gen: 5, Behind: true})
	q.add(Want[*receiver]{To: again, Partition: 0, Gen: 1, Behind: true})
	if b := q.takeBehind(); len(b) != 1 || b[0].To != again {
		t.Fatalf("takeBehind = %v, want only the new runner's want", b)
	}
	q.add(Want[*receiver]{To: a0, Partition: 0, Gen: 6})
	q.add(Want[*receiver]{To: again, Partition: 0, Gen: 2})
	if all := q.takeAll(); len(all) != 1 || all[0].To != again {
		t.Fatalf("takeAll = %v, want only the new runner's want", all)
	}
}

// TestFetchRequestIndex: a Fetch request lists each topic once with its
// partitions, and every partition of the answer, named by topic or (v13+)
// by topic id, finds the want that asked for it; a partition or topic not
// asked for finds none.
func TestFetchRequestIndex(t *testing.T) {
	idA, idB := [16]byte{1}, [16]byte{2}
	var wants []Want[*receiver]
	for _, w := range []struct {
		topic string
		id    [16]byte
		p     int32
	}{{"a", idA, 3}, {"b", idB, 0}, {"a", idA, 1}, {"b", idB, 7}} {
		wants = append(wants, Want[*receiver]{To: &receiver{topic: w.topic}, TopicID: w.id, Partition: w.p, Offset: int64(10 * w.p)})
	}
	req, idx := fetchRequest(fetchJob[*receiver]{wants: wants, maxWait: 100})
	if len(req.Topics) != 2 || req.Topics[0].Topic != "a" || req.Topics[0].TopicID != idA || len(req.Topics[0].Partitions) != 2 ||
		req.Topics[1].Topic != "b" || len(req.Topics[1].Partitions) != 2 || req.Topics[1].Partitions[1].FetchOffset != 70 {
		t.Fatalf("request topics %+v", req.Topics)
	}
	for j, w := range wants {
		for _, by := range []struct {
			name string
			id   [16]byte
		}{{w.topic(), [16]byte{}}, {"", w.TopicID}} {
			got, name, ok := idx.find(by.name, by.id, w.Partition)
			if !ok || got != j || name != w.topic() {
				t.Errorf("find(%q, %v, %d) = %d %q %v, want %d %q", by.name, by.id[0], w.Partition, got, name, ok, j, w.topic())
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
	if got := ClientID("east-1", 2, "a-to-b"); got != "kmirror-east-1-2-a-to-b" {
		t.Fatalf("ClientID = %q", got)
	}
}

func TestFetchRequestLimits(t *testing.T) {
	if req, _ := fetchRequest(fetchJob[*receiver]{maxWait: 100}); req.MinBytes != 1 || req.MaxBytes != 64<<20 {
		t.Fatalf("defaults: min %d max %d", req.MinBytes, req.MaxBytes)
	}
	req, _ := fetchRequest(fetchJob[*receiver]{maxWait: 100, limits: Limits{MinBytes: 1024, MaxBytes: 1 << 20}})
	if req.MinBytes != 1024 || req.MaxBytes != 1<<20 {
		t.Fatalf("mirror.fetch.min.bytes/response.max.bytes: min %d max %d", req.MinBytes, req.MaxBytes)
	}
}

// TestAnswerParksIdlePartitions: an expired long-poll's partitions with
// nothing new wait in the fetch session, their runners left asleep with
// the source offsets published, unless they must hear an answer; a
// partition with records is answered, and one the response leaves out
// hears an error.
func TestAnswerParksIdlePartitions(t *testing.T) {
	f := New[*receiver](Config{Key: Key{Broker: 1}})
	idle, must, data, missing := &receiver{topic: "a"}, &receiver{topic: "a"}, &receiver{topic: "a"}, &receiver{topic: "a"}
	wants := []Want[*receiver]{
		{To: idle, Partition: 0, Offset: 5, Gen: 1},
		{To: must, Partition: 1, Offset: 5, Gen: 1, MustAnswer: true},
		{To: data, Partition: 2, Offset: 5, Gen: 1},
		{To: missing, Partition: 3, Offset: 5, Gen: 1},
	}
	_, idx := fetchRequest(fetchJob[*receiver]{wants: wants, maxWait: 100})
	fr := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "a"
	for p := range int32(3) {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark = p, 5
		if p == 2 {
			rp.RecordBatches, rp.HighWatermark = []byte{1}, 6
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	fr.Topics = append(fr.Topics, rt)
	f.answer(wants, fr, idx, true, 0)
	if len(idle.answers) != 0 || idle.hwm != 5 || len(f.sess.members) != 1 {
		t.Fatalf("idle partition: answers %v, published hwm %d, session members %d; want it parked", idle.answers, idle.hwm, len(f.sess.members))
	}
	if len(must.answers) != 1 || !must.answers[0].Empty() {
		t.Fatalf("a want that must be answered got %v", must.answers)
	}
	if len(data.answers) != 1 || len(data.answers[0].Records) != 1 || data.answers[0].HWM != 6 {
		t.Fatalf("partition with records got %v", data.answers)
	}
	if len(missing.answers) != 1 || !errors.Is(missing.answers[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("partition left out of the response got %v", missing.answers)
	}
}
