package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// coordCluster is a 3-broker cluster and a cluster value to acquire
// producer ids with.
func coordCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *cluster) {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	c, err := newCluster("destination", kc.ListenAddrs(), "coordinator-test")
	if err != nil {
		t.Fatal(err)
	}
	c.jitter = halfJitter
	t.Cleanup(c.close)
	return kc, c
}

// halfJitter makes every retry wait half its ceiling: the retries of a
// test take the same time on every run.
func halfJitter() float64 { return 0.5 }

// seenRequests is what a control function saw of the requests of one key.
type seenRequests struct {
	mu       sync.Mutex
	nodes    []int32 // the broker each request reached, in order
	versions []int16
}

func (s *seenRequests) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

func (s *seenRequests) snapshot() (nodes []int32, versions []int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int32(nil), s.nodes...), append([]int16(nil), s.versions...)
}

// failKey answers the first n requests of key (FindCoordinator or
// InitProducerID) with code, lets the cluster answer the rest, and records
// them all.
func failKey(kc *kfake.Cluster, key kmsg.Key, n int, code int16) *seenRequests {
	s := new(seenRequests)
	kc.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		s.mu.Lock()
		i := len(s.nodes)
		s.nodes = append(s.nodes, kc.CurrentNode())
		s.versions = append(s.versions, req.GetVersion())
		s.mu.Unlock()
		if i >= n {
			return nil, nil, false
		}
		switch r := req.(type) {
		case *kmsg.FindCoordinatorRequest:
			resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID = code, -1 // v0-3
			for _, k := range r.CoordinatorKeys {
				rc := kmsg.NewFindCoordinatorResponseCoordinator()
				rc.Key, rc.ErrorCode, rc.NodeID = k, code, -1
				resp.Coordinators = append(resp.Coordinators, rc)
			}
			return resp, nil, true
		case *kmsg.InitProducerIDRequest:
			resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
			return resp, nil, true
		}
		return nil, nil, false
	})
	return s
}

// observe records the requests of key and lets the cluster answer them.
func observe(kc *kfake.Cluster, key kmsg.Key) *seenRequests { return failKey(kc, key, 0, 0) }

// unknownCoordinator is a coordinator kept by no earlier call.
func unknownCoordinator() *int32 {
	c := int32(-1)
	return &c
}

// TestInitProducerIDFindsCoordinator: initProducerID finds the coordinator
// of the transactional id on every call (one FindCoordinator each: kgo's
// coordinator cache is not used) and sends InitProducerID straight to it; a
// second call keeps the producer id and bumps the epoch, with the single
// key FindCoordinator of Kafka < 3.0 as with the batch one. A coordinator
// that is loading, moved, or still aborting is asked again; an
// authorization failure is returned at once; the retries are bounded.
func TestInitProducerIDFindsCoordinator(t *testing.T) {
	ctx := context.Background()
	const id = "kmirror/m/t/0"

	findV3 := kversion.Stable()
	findV3.SetMaxKeyVersion(int16(kmsg.FindCoordinator), 3)
	for _, tt := range []struct {
		name      string
		opts      []kfake.Opt
		v4orLater bool
	}{
		{"batch FindCoordinator", nil, true},
		{"single key FindCoordinator", []kfake.Opt{kfake.MaxVersions(findV3)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kc, c := coordCluster(t, tt.opts...)
			finds, inits := observe(kc, kmsg.FindCoordinator), observe(kc, kmsg.InitProducerID)
			first, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator())
			if err != nil {
				t.Fatal(err)
			}
			second, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator())
			if err != nil {
				t.Fatal(err)
			}
			if second.ProducerID != first.ProducerID || second.ProducerEpoch != first.ProducerEpoch+1 {
				t.Fatalf("second init = pid %d epoch %d, want pid %d epoch %d",
					second.ProducerID, second.ProducerEpoch, first.ProducerID, first.ProducerEpoch+1)
			}
			_, versions := finds.snapshot()
			if len(versions) != 2 {
				t.Fatalf("%d FindCoordinator requests for two inits, want one each (kgo's cache would send one in all)", len(versions))
			}
			for _, v := range versions {
				if (v >= 4) != tt.v4orLater {
					t.Fatalf("FindCoordinator v%d sent", v)
				}
			}
			nodes, _ := inits.snapshot()
			want := kc.CoordinatorFor(id)
			if len(nodes) != 2 || nodes[0] != want || nodes[1] != want {
				t.Fatalf("InitProducerID requests reached brokers %v, want two to the coordinator %d", nodes, want)
			}
		})
	}

	t.Run("coordinator moved", func(t *testing.T) {
		kc, c := coordCluster(t)
		if _, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator()); err != nil {
			t.Fatal(err)
		}
		old := kc.CoordinatorFor(id)
		for i := 0; kc.CoordinatorFor(id) == old; i++ {
			if i == 100 {
				t.Fatal("the coordinator never moved")
			}
			kc.RehashCoordinators()
		}
		inits := observe(kc, kmsg.InitProducerID)
		if _, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator()); err != nil {
			t.Fatal(err)
		}
		// A cached coordinator would have been asked first, and answered
		// NOT_COORDINATOR.
		if nodes, _ := inits.snapshot(); len(nodes) != 1 || nodes[0] != kc.CoordinatorFor(id) {
			t.Fatalf("InitProducerID requests reached brokers %v, want one to the new coordinator %d", nodes, kc.CoordinatorFor(id))
		}
	})

	t.Run("coordinator kept between calls", func(t *testing.T) {
		kc, c := coordCluster(t)
		coord := unknownCoordinator()
		if _, err := c.initProducerID(ctx, id, 60_000, coord); err != nil {
			t.Fatal(err)
		}
		if *coord != kc.CoordinatorFor(id) {
			t.Fatalf("kept coordinator %d, want %d", *coord, kc.CoordinatorFor(id))
		}
		finds, inits := observe(kc, kmsg.FindCoordinator), observe(kc, kmsg.InitProducerID)
		if _, err := c.initProducerID(ctx, id, 60_000, coord); err != nil {
			t.Fatal(err)
		}
		if n := finds.count(); n != 0 {
			t.Fatalf("%d FindCoordinator requests with the coordinator kept, want none", n)
		}
		old := kc.CoordinatorFor(id)
		for i := 0; kc.CoordinatorFor(id) == old; i++ {
			if i == 100 {
				t.Fatal("the coordinator never moved")
			}
			kc.RehashCoordinators()
		}
		if _, err := c.initProducerID(ctx, id, 60_000, coord); err != nil {
			t.Fatal(err)
		}
		nodes, _ := inits.snapshot()
		if want := []int32{old, old, kc.CoordinatorFor(id)}; !slices.Equal(nodes, want) {
			t.Fatalf("InitProducerID requests reached brokers %v, want %v (the kept coordinator, then the new one)", nodes, want)
		}
		if n := finds.count(); n != 1 || *coord != kc.CoordinatorFor(id) {
			t.Fatalf("after the move: %d FindCoordinator requests, kept coordinator %d; want 1 and %d", n, *coord, kc.CoordinatorFor(id))
		}
	})

	for _, tt := range []struct {
		name  string
		key   kmsg.Key
		n     int
		code  int16
		finds int // FindCoordinator requests in all
		inits int // InitProducerID requests in all
	}{
		{"coordinator loading", kmsg.FindCoordinator, 1, kerr.CoordinatorLoadInProgress.Code, 2, 1},
		{"coordinator not available", kmsg.FindCoordinator, 2, kerr.CoordinatorNotAvailable.Code, 3, 1},
		{"not coordinator", kmsg.InitProducerID, 1, kerr.NotCoordinator.Code, 2, 2},
		{"init loading", kmsg.InitProducerID, 1, kerr.CoordinatorLoadInProgress.Code, 2, 2},
		{"older epoch aborting", kmsg.InitProducerID, 2, kerr.ConcurrentTransactions.Code, 3, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kc, c := coordCluster(t)
			var finds, inits *seenRequests
			if tt.key == kmsg.FindCoordinator {
				finds, inits = failKey(kc, tt.key, tt.n, tt.code), observe(kc, kmsg.InitProducerID)
			} else {
				finds, inits = observe(kc, kmsg.FindCoordinator), failKey(kc, tt.key, tt.n, tt.code)
			}
			resp, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator())
			if err != nil {
				t.Fatalf("init after %d %s answers: %v", tt.n, kerr.ErrorForCode(tt.code), err)
			}
			if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
				t.Fatalf("init = pid %d epoch %d", resp.ProducerID, resp.ProducerEpoch)
			}
			if f, i := finds.count(), inits.count(); f != tt.finds || i != tt.inits {
				t.Fatalf("%d FindCoordinator and %d InitProducerID requests, want %d and %d", f, i, tt.finds, tt.inits)
			}
		})
	}

	t.Run("not authorized", func(t *testing.T) {
		for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.InitProducerID} {
			kc, c := coordCluster(t)
			seen := failKey(kc, key, 1000, kerr.TransactionalIDAuthorizationFailed.Code)
			if _, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator()); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
				t.Fatalf("init with %s denied = %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", key.Name(), err)
			}
			if n := seen.count(); n != 1 {
				t.Fatalf("%d %s requests, want 1: no retry", n, key.Name())
			}
		}
	})

	t.Run("retries spent", func(t *testing.T) {
		kc, c := coordCluster(t)
		seen := failKey(kc, kmsg.InitProducerID, 1000, kerr.NotCoordinator.Code)
		if _, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator()); !errors.Is(err, kerr.NotCoordinator) {
			t.Fatalf("init = %v, want NOT_COORDINATOR once the retries are spent", err)
		}
		if n := seen.count(); n != initPIDRetries+1 {
			t.Fatalf("%d InitProducerID requests, want %d", n, initPIDRetries+1)
		}
	})

	t.Run("context ends", func(t *testing.T) {
		kc, c := coordCluster(t)
		failKey(kc, kmsg.InitProducerID, 1000, kerr.NotCoordinator.Code)
		ctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := c.initProducerID(ctx, id, 60_000, unknownCoordinator()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("init = %v, want the context's end", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("init returned %v after the context ended", d)
		}
	})
}
