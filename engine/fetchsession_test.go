package engine_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// fetchWatch counts the source's Fetch requests: how many in a row were
// incremental session requests listing no partition, how many opened a
// session, and it can answer the next session request with an error.
type fetchWatch struct {
	mu          sync.Mutex
	emptyRun    int // incremental session requests in a row that list no partition
	opened      int // requests that opened a session (epoch 0)
	failNext    bool
	failed      int
	lastListing int // partitions listed by the last request
}

func (w *fetchWatch) install(c *enginetest.Cluster) {
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		n := 0
		for _, t := range fr.Topics {
			n += len(t.Partitions)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.lastListing = n
		switch {
		case fr.SessionEpoch == 0:
			w.opened++
			w.emptyRun = 0
		case fr.SessionEpoch > 0 && n == 0:
			w.emptyRun++
		case n > 0:
			w.emptyRun = 0
		}
		if w.failNext && fr.SessionEpoch > 0 {
			w.failNext = false
			w.failed++
			resp := fr.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return resp, nil, true
		}
		return nil, nil, false
	})
}

func (w *fetchWatch) read(f func(*fetchWatch) (bool, string)) func() (bool, string) {
	return func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return f(w)
	}
}

// TestIdlePartitionsWaitInAFetchSession: once caught up, the partitions of
// a mirror are polled through fetch sessions (KIP-227) whose requests name
// no partition at all while nothing changes; a record produced to one of
// them is still mirrored, and a session the broker lost is opened again,
// with every partition in it.
func TestIdlePartitionsWaitInAFetchSession(t *testing.T) {
	e := newEnv(t)
	const topic, partitions = "idle", 60
	e.src.CreateTopic(t, topic, partitions, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, topic, partitions, 5*partitions, "first")
	e.startMirror(topic)
	e.waitCaughtUp(topic)

	var w fetchWatch
	w.install(e.src)
	enginetest.Wait(t, 30*time.Second, w.read(func(w *fetchWatch) (bool, string) {
		return w.emptyRun >= 5, fmt.Sprintf("%d incremental fetches in a row named no partition; the last named %d", w.emptyRun, w.lastListing)
	}))

	produceTo := func(p int32, tag string) {
		t.Helper()
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(tag)}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		e.waitCaughtUp(topic)
	}
	produceTo(7, "one")

	w.mu.Lock()
	opened := w.opened
	w.failNext = true
	w.mu.Unlock()
	enginetest.Wait(t, 30*time.Second, w.read(func(w *fetchWatch) (bool, string) {
		return w.failed == 1 && w.opened > opened, fmt.Sprintf("session errors answered %d, sessions opened %d (before %d)", w.failed, w.opened, opened)
	}))
	produceTo(9, "two")
	e.assertIdentical(topic)
}
