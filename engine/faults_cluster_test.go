package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// newNetEnv is newEnv with both clusters behind an enginetest.Network, so
// the test can cut connections and take brokers off the network.
func newNetEnv(t *testing.T) (e *env, srcNet, dstNet *enginetest.Network) {
	t.Helper()
	srcNet, dstNet = enginetest.NewNetwork(), enginetest.NewNetwork()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.ListenFn(srcNet.Listen))
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.ListenFn(dstNet.Listen))
	e = envOn(t, src, dst)
	e.startEngine()
	return e, srcNet, dstNet
}

// side picks the source or the destination of an env for table tests.
type side struct {
	name string
	c    func(*env) *enginetest.Cluster
	net  func(src, dst *enginetest.Network) *enginetest.Network
}

var sides = []side{
	{"source", func(e *env) *enginetest.Cluster { return e.src }, func(s, _ *enginetest.Network) *enginetest.Network { return s }},
	{"destination", func(e *env) *enginetest.Cluster { return e.dst }, func(_, d *enginetest.Network) *enginetest.Network { return d }},
}

// minDestEnd returns the smallest destination log end over the
// partitions of topic, for waiting on progress.
func (e *env) minDestEnd(topic string) int64 {
	ends, err := enginetest.Ends(context.Background(), e.dstCl, topic)
	if err != nil || len(ends) == 0 {
		return -1
	}
	m := ends[0]
	for _, end := range ends[1:] {
		m = min(m, end)
	}
	return m
}

// waitProgress waits until every partition of topic has n more records on
// the destination than when it was called.
func (e *env) waitProgress(topic string, partitions int, n int64) {
	e.t.Helper()
	e.waitMirroredAtLeast(topic, partitions, max(0, e.minDestEnd(topic))+n)
}

// TestConnectionsCutMidStream closes every TCP connection to the source's
// or the destination's brokers three times while records flow (fetches,
// appends with batches in flight, metadata and offset requests all lose
// their connection at once). The mirror reconnects by itself; nothing is
// lost or duplicated.
func TestConnectionsCutMidStream(t *testing.T) {
	for _, s := range sides {
		t.Run(s.name, func(t *testing.T) {
			e, srcNet, dstNet := newNetEnv(t)
			e.src.CreateTopic(t, "cut", 3, nil)
			cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
			enginetest.Produce(t, cl, "cut", 3, 100, "first")
			e.startMirror("cut")
			stop := make(chan struct{})
			wg := enginetest.ProduceInBackground(t, cl, 3, 50, stop, "cut")
			e.waitProgress("cut", 3, 150)

			nw := s.net(srcNet, dstNet)
			for range 3 {
				// Right after a reconnect there may be an instant with no
				// connection open: cut as soon as there is one.
				enginetest.Wait(t, 10*time.Second, func() (bool, string) {
					return nw.Cut("") > 0, fmt.Sprintf("no %s connection to cut", s.name)
				})
				e.waitProgress("cut", 3, 150)
			}
			close(stop)
			wg.Wait()
			e.waitCaughtUp("cut")
			e.assertIdentical("cut")
			t.Logf("%d %s connections cut", nw.Cuts(), s.name)
		})
	}
}

// dropConnections makes the cluster close the connection of the next n
// requests with key that match (the request is never handled), and returns
// a counter of the connections dropped so far.
func dropConnections(c *enginetest.Cluster, key kmsg.Key, n int32, match func(kmsg.Request) bool) *atomic.Int32 {
	var dropped atomic.Int32
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !match(req) {
			c.KeepControl()
			return nil, nil, false
		}
		if dropped.Add(1) >= n {
			c.DropControl()
		} else {
			c.KeepControl()
		}
		return nil, errors.New("connection dropped by the test"), true
	})
	return &dropped
}

// fetchesTopic matches Fetch requests that name topic (by name, or by its
// id on the cluster c; look the id up outside any control function).
func fetchesTopic(c *enginetest.Cluster, topic string) func(kmsg.Request) bool {
	id := c.TopicInfo(topic).TopicID
	return func(req kmsg.Request) bool {
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			if t.Topic == topic || t.TopicID == id {
				return true
			}
		}
		return false
	}
}

// producesTopic matches Produce requests that name topic on the cluster c.
func producesTopic(c *enginetest.Cluster, topic string) func(kmsg.Request) bool {
	id := c.TopicInfo(topic).TopicID
	return func(req kmsg.Request) bool {
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			if t.Topic == topic || t.TopicID == id {
				return true
			}
		}
		return false
	}
}

// TestConnectionDroppedAtRequest: the source broker closes the connection
// instead of answering a Fetch, or the destination broker instead of
// answering a Produce (with other batches of the partition queued behind it
// on the same connection), five times each. Every partition realigns and
// keeps mirroring; the result is identical.
func TestConnectionDroppedAtRequest(t *testing.T) {
	for _, tc := range []struct {
		side  string
		key   kmsg.Key
		match func(*enginetest.Cluster, string) func(kmsg.Request) bool
	}{
		{"source Fetch", kmsg.Fetch, fetchesTopic},
		{"destination Produce", kmsg.Produce, producesTopic},
	} {
		t.Run(tc.side, func(t *testing.T) {
			e := newEnv(t)
			e.src.CreateTopic(t, "dropped", 3, nil)
			cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
			enginetest.Produce(t, cl, "dropped", 3, 100, "first")
			e.startMirror("dropped")
			e.waitCaughtUp("dropped")

			c := e.src
			if tc.key == kmsg.Produce {
				c = e.dst
			}
			const drops = 5
			dropped := dropConnections(c, tc.key, drops, tc.match(c, "dropped"))
			stop := make(chan struct{})
			wg := enginetest.ProduceInBackground(t, cl, 3, 50, stop, "dropped")
			enginetest.Wait(t, 60*time.Second, func() (bool, string) {
				return dropped.Load() >= drops, fmt.Sprintf("%d of %d connections dropped", dropped.Load(), drops)
			})
			e.waitProgress("dropped", 3, 100)
			close(stop)
			wg.Wait()
			e.waitCaughtUp("dropped")
			e.assertIdentical("dropped")
		})
	}
}

// TestSourceFetchTimeouts: the source answers Fetch with REQUEST_TIMED_OUT
// six times, then stops answering one Fetch altogether (a hung broker:
// kfake neither answers nor reads further on that connection) until
// kmirror's fetch timeout gives the connection up. Both are retried
// by themselves; the partitions keep mirroring and stay identical.
func TestSourceFetchTimeouts(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "slow", 3, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("gzip", true)...)
	enginetest.Produce(t, cl, "slow", 3, 100, "first")
	e.startMirror("slow")
	e.waitCaughtUp("slow")

	h := e.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "slow", Err: kerr.RequestTimedOut, Count: 6})
	enginetest.Produce(t, cl, "slow", 3, 100, "timed-out")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.Wait(ctx, 6); err != nil {
		t.Fatalf("REQUEST_TIMED_OUT answered %d of 6 fetches: %v", h.Hits(), err)
	}
	e.waitCaughtUp("slow")

	var swallowed atomic.Int32
	slow := fetchesTopic(e.src, "slow")
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !slow(req) {
			e.src.KeepControl()
			return nil, nil, false
		}
		swallowed.Add(1)
		e.src.DropControl() // KeepControl sticks to a control until dropped
		return nil, nil, true
	})
	enginetest.Produce(t, cl, "slow", 3, 100, "hung")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return swallowed.Load() == 1, "no fetch swallowed"
	})
	hung := time.Now()
	e.waitCaughtUp("slow")
	t.Logf("caught up %s after a fetch hung", time.Since(hung).Round(time.Millisecond))
	e.assertIdentical("slow")
}

// brokerAddr returns the listener address of a cluster's broker.
func brokerAddr(t *testing.T, cl *kgo.Client, node int32) string {
	t.Helper()
	bs, err := kadm.NewClient(cl).ListBrokers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.NodeID == node {
			return b.Host + ":" + strconv.Itoa(int(b.Port))
		}
	}
	t.Fatalf("broker %d not in metadata %v", node, bs)
	return ""
}

// TestBrokerRemovedAndReadded takes the broker leading partition 0 out of
// the source or the destination cluster (its connections close, leadership
// of every partition moves among the others), brings it back — on its old
// port, or on a new one as a replaced machine would — and moves every
// partition's leadership to it. Mirroring follows each move by itself.
func TestBrokerRemovedAndReadded(t *testing.T) {
	for _, s := range sides {
		for _, samePort := range []bool{true, false} {
			name := s.name + "/new port"
			if samePort {
				name = s.name + "/same port"
			}
			t.Run(name, func(t *testing.T) {
				e, srcNet, dstNet := newNetEnv(t)
				const parts = 4
				e.src.CreateTopic(t, "churn", parts, nil)
				cl := e.src.Client(t, enginetest.ProducerOpts("snappy", true)...)
				enginetest.Produce(t, cl, "churn", parts, 100, "first")
				e.startMirror("churn")
				stop := make(chan struct{})
				wg := enginetest.ProduceInBackground(t, cl, parts, 50, stop, "churn")
				e.waitProgress("churn", parts, 150)

				c, nw := s.c(e), s.net(srcNet, dstNet)
				victim := c.LeaderFor("churn", 0)
				addr := brokerAddr(t, c.Client(t), victim)
				if err := c.RemoveNode(victim); err != nil {
					t.Fatal(err)
				}
				nw.Cut(addr) // a broker that leaves closes its connections
				for p := range int32(parts) {
					if l := c.LeaderFor("churn", p); l == victim {
						t.Fatalf("churn/%d still led by removed broker %d", p, l)
					}
				}
				e.waitProgress("churn", parts, 150)

				port := 0
				if samePort {
					_, ps, err := net.SplitHostPort(addr)
					if err != nil {
						t.Fatal(err)
					}
					port, _ = strconv.Atoi(ps)
				}
				if _, _, err := c.AddNode(victim, port); err != nil {
					t.Fatalf("re-add broker %d on port %d: %v", victim, port, err)
				}
				for p := range int32(parts) {
					if err := c.MoveTopicPartition("churn", p, victim); err != nil {
						t.Fatal(err)
					}
				}
				e.waitProgress("churn", parts, 150)
				close(stop)
				wg.Wait()
				e.waitCaughtUp("churn")
				e.assertIdentical("churn")
				for _, ps := range e.partitions() {
					if s.name == "source" && ps.SourceLeader != victim {
						t.Errorf("churn/%d: source leader %d, want the re-added broker %d", ps.Partition, ps.SourceLeader, victim)
					}
				}
			})
		}
	}
}

// TestDestinationUnavailable takes the whole destination cluster off the
// network while the source keeps taking writes: every connection is cut and
// new ones are closed on accept, until the engine has shown it noticed. An
// ad-hoc mirror's partitions report the outage and realign until at least
// one has gone FAILED (its realignments exhausted) and failed a retry too; a
// joined instance loses its group membership, stops its runners and keeps
// trying to rejoin. Then
// the destination comes back: every partition resumes by itself (through
// its retry backoff, or the instance rejoining and taking its shards back)
// and the destination ends identical to the source, nothing lost and
// nothing written twice.
func TestDestinationUnavailable(t *testing.T) {
	for _, joined := range []bool{false, true} {
		name := "ad hoc mirror"
		if joined {
			name = "joined instance"
		}
		t.Run(name, func(t *testing.T) {
			var e *env
			var adm *engine.Admin
			dstNet := enginetest.NewNetwork()
			if joined {
				src := enginetest.NewCluster(t, "kmirror-test-source")
				dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.ListenFn(dstNet.Listen))
				e, adm = newStateEnvOn(t, src, dst, "outage", 3)
			} else {
				e, _, dstNet = newNetEnv(t)
				e.src.CreateTopic(t, "outage", 3, nil)
				e.startMirror("outage")
			}
			events := collectEvents(t, e.eng)
			cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
			enginetest.Produce(t, cl, "outage", 3, 100, "first")
			e.waitCaughtUp("outage")

			start := time.Now()
			dstNet.Down("")
			enginetest.Produce(t, cl, "outage", 3, 100, "during")
			enginetest.Wait(t, 60*time.Second, func() (bool, string) {
				if joined {
					lost := len(events.matching(engine.LevelInfo, "owning 0 of"))
					rejoins := len(events.matching(engine.LevelWarn, "unable to join group session"))
					// The snapshot must not pass the last records off
					// as partitions this instance runs.
					flagged := 0
					for _, p := range e.partitions() {
						if strings.Contains(p.Error, "not running here") {
							flagged++
						}
					}
					return lost > 0 && rejoins >= 4 && flagged == 3, fmt.Sprintf("ownership lost %d times, %d failed rejoins, %d partitions shown as not running: %s", lost, rejoins, flagged, e.describe())
				}
				retried, noticed := 0, 0
				for _, p := range e.partitions() {
					if p.Error != "" {
						noticed++
					}
					if p.State == partition.Failed && p.Attempt >= 2 {
						retried++ // FAILED, and a retry failed too
					}
				}
				return noticed == 3 && retried > 0, fmt.Sprintf("%d partitions report the outage, %d retried from FAILED: %s", noticed, retried, e.describe())
			})
			t.Logf("destination down for %s: %s", time.Since(start).Round(time.Millisecond), e.describe())
			dstNet.Up()
			enginetest.Produce(t, cl, "outage", 3, 100, "after")
			if joined {
				e.waitAll(3, partition.Mirroring)
				enginetest.Wait(t, 30*time.Second, func() (bool, string) {
					for _, p := range e.partitions() {
						if p.Error != "" {
							return false, e.describe()
						}
					}
					return true, ""
				})
			}
			e.waitCaughtUp("outage")
			t.Logf("caught up %s after the outage began", time.Since(start).Round(time.Millisecond))
			e.assertIdentical("outage")
			if joined {
				waitPersisted(t, adm, "outage", 3, partition.Mirroring, "one")
			}
		})
	}
}

// hangProduce mirrors topic, caught up, then has the destination take the
// next Produce for it and never answer it nor anything after it on that
// connection (a hung broker), with more records waiting on the source.
func hangProduce(t *testing.T, e *env, topic string, partitions int32) {
	t.Helper()
	e.src.CreateTopic(t, topic, partitions, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, topic, partitions, 100, "first")
	e.startMirror(topic)
	e.waitCaughtUp(topic)

	var swallowed atomic.Int32
	hung := producesTopic(e.dst, topic)
	e.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !hung(req) {
			e.dst.KeepControl()
			return nil, nil, false
		}
		swallowed.Add(1)
		e.dst.DropControl()
		return nil, nil, true
	})
	enginetest.Produce(t, cl, topic, partitions, 100, "hung")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return swallowed.Load() == 1, "no produce swallowed"
	})
}

// TestDestinationProduceHangs: the destination broker takes one Produce and
// never answers it, nor anything after it on that connection (a hung
// broker). The connection is given up once the request is overdue by half
// the request timeout, and the partition realigns on a new connection
// instead of waiting for ever with its batches queued behind it.
func TestDestinationProduceHangs(t *testing.T) {
	e := newEnv(t)
	e.eng.Close()
	e.engCfg = func(c *engine.Config) { c.RequestTimeout = 2 * time.Second }
	e.startEngine()
	hangProduce(t, e, "stuck", 3)
	e.waitCaughtUp("stuck")
	e.assertIdentical("stuck")
}

// TestCloseWhileProduceHangs: Close returns while a destination Produce
// hangs (default request timeout: the connection would be given up only
// after 45 s), and a new engine resumes identical.
func TestCloseWhileProduceHangs(t *testing.T) {
	e := newEnv(t)
	hangProduce(t, e, "stuck", 2)
	closed := make(chan struct{})
	go func() {
		e.eng.Close()
		close(closed)
	}()
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		select {
		case <-closed:
			return true, ""
		default:
			return false, "Close still waiting for the hung produce"
		}
	})
	e.startEngine()
	e.startMirror("stuck")
	e.waitCaughtUp("stuck")
	e.assertIdentical("stuck")
}
