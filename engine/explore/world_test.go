package explore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/props"
)

const mirrorName = "a-to-b"

// shortTxnTimeout is the destination's transaction.max.timeout.ms when the
// txn-timeout kind is drawn: short enough that a step can wait for the
// destination to abort a mirrored transaction on its own.
const shortTxnTimeout = 3 * time.Second

// world is one scenario's clusters, instances and clients. Everything in
// it belongs to the scenario's subtest and closes with it.
type world struct {
	t   *testing.T
	ctx context.Context

	srcNet, dstNet *enginetest.Network
	brk            *enginetest.EpochBroker // the destination fences as a real broker does
	src, dst       *enginetest.Cluster
	dstAddr        []string    // each destination broker's address, by node id
	dstGone        int32       // the destination broker brokerDown removed, -1 none
	srcCl, dstCl   *kgo.Client // the oracle's and the steps' admin clients
	srcAdm, dstAdm *kadm.Client
	adm            *engine.Admin

	plain, idem *kgo.Client // source producers
	foreign     *kgo.Client // writes to the destination as a client of B would
	txn         *kgo.Client // the producer of the open source transaction, nil none
	txnTopic    string
	txnP        int32

	inst [slots]*instance
	m    *model
	orc  *oracle

	stepNo int
	final  bool // the checks after the last step
	// strictKnown fails known defects' violations too (KMIRROR_EXPLORE_KNOWN=fail).
	strictKnown bool
	notes       []string // what went wrong that is no violation (a step the clusters refused)
}

// instance is one running engine joined to the destination's __mirror_state.
type instance struct {
	name    string
	eng     *engine.Engine
	started time.Time
	mu      sync.Mutex
	events  []string // the instance's last events, for a failure report
	done    chan struct{}
}

// mirrorSettings are the mirror's properties: fast retries, checkpoints
// and metadata rounds, so a scenario settles in seconds.
func mirrorSettings(src *enginetest.Cluster) map[string]string {
	return map[string]string{
		props.KeyBootstrapServers:    strings.Join(src.Addrs(), ","),
		props.KeyRetryInitialBackoff: "20",
		props.KeyRetryMaxBackoff:     "500",
		props.KeyCheckpointInterval:  "200",
		props.KeyMetadataRefresh:     "500",
	}
}

// newWorld starts two three-broker clusters behind networks the steps can
// cut, the two topics on the source, the mirror recorded and started in
// the destination's __mirror_state, and instance 0.
func newWorld(t *testing.T, shortTxn bool) *world {
	w := &world{t: t, ctx: t.Context(), srcNet: enginetest.NewNetwork(), dstNet: enginetest.NewNetwork(), m: newModel()}
	w.src = enginetest.NewCluster(t, "kmirror-explore-source", kfake.ListenFn(w.srcNet.Listen))
	w.brk = enginetest.NewEpochBroker().On(w.dstNet.Listen)
	dstOpts := []kfake.Opt{kfake.ListenFn(w.brk.Listen)}
	if shortTxn {
		dstOpts = append(dstOpts, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": fmt.Sprint(shortTxnTimeout.Milliseconds())}))
	}
	w.dst = enginetest.NewCluster(t, "kmirror-explore-destination", dstOpts...)
	w.dstAddr, w.dstGone = w.dst.Addrs(), -1 // kfake numbers its first brokers 0, 1, 2 in listener order
	// Clients that give up within a step: a cluster held down must not
	// hold the scenario for kgo's default minute.
	quick := []kgo.Opt{kgo.RetryTimeout(10 * time.Second), kgo.RequestTimeoutOverhead(5 * time.Second)}
	w.srcCl, w.dstCl = w.src.Client(t, quick...), w.dst.Client(t, quick...)
	w.srcAdm, w.dstAdm = kadm.NewClient(w.srcCl), kadm.NewClient(w.dstCl)
	w.plain = w.src.Client(t, append(enginetest.ProducerOpts("lz4", false), quick...)...)
	w.idem = w.src.Client(t, append(enginetest.ProducerOpts("zstd", true), quick...)...)
	w.foreign = w.dst.Client(t, append(enginetest.ProducerOpts("none", false), quick...)...)
	for _, tp := range topicNames {
		w.src.CreateTopic(t, tp, firstPartitions, nil)
	}
	adm, err := engine.NewAdmin(w.ctx, w.dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	w.adm = adm
	if _, err := adm.CreateMirror(w.ctx, mirrorName, props.FromMap(mirrorSettings(w.src)), false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics(strings.Join(topicNames, ","))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(w.ctx, mirrorName, sel, nil); err != nil {
		t.Fatal(err)
	}
	w.orc = newOracle(w)
	if err := w.startInstance(0); err != nil {
		t.Fatal(err)
	}
	// The instances are closed before the clusters (cleanups run last
	// registered first), so none of them outlives its destination.
	t.Cleanup(w.closeAll)
	return w
}

// note records something that went wrong but is no violation.
func (w *world) note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf("step %d: ", w.stepNo)+fmt.Sprintf(format, args...))
}

func instanceName(slot int) string { return fmt.Sprintf("x%d", slot) }

// startInstance runs a new engine in slot, joined to __mirror_state as
// `kmirror run` does.
func (w *world) startInstance(slot int) error {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	eng, err := engine.New(ctx, engine.Config{
		Destination: w.dstAddr, Instance: instanceName(slot),
		HeartbeatInterval: 300 * time.Millisecond, RequestTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := eng.Join(ctx); err != nil {
		eng.Close()
		return err
	}
	in := &instance{name: instanceName(slot), eng: eng, started: time.Now(), done: make(chan struct{})}
	go in.collect()
	w.inst[slot] = in
	return nil
}

// collect keeps the instance's last events until it closes.
func (in *instance) collect() {
	for {
		select {
		case ev := <-in.eng.Events():
			in.mu.Lock()
			in.events = append(in.events, fmt.Sprintf("%s %s %s/%d %s", ev.Time.Format("15:04:05.000"), ev.Level, ev.Topic, ev.Partition, ev.Message))
			if len(in.events) > 40 {
				in.events = in.events[len(in.events)-40:]
			}
			in.mu.Unlock()
		case <-in.done:
			return
		}
	}
}

func (in *instance) lastEvents() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.events...)
}

// killInstance closes the engine in slot without pausing or stopping
// anything first, as the in-process restart tests kill one: its runners
// are cut off wherever they are, and the next owner takes over from what
// __mirror_state and the destination hold. (A SIGKILL of a process is
// TestChaosKillRestart's.) A close that does not return within a minute is
// reported, the engine left behind.
func (w *world) killInstance(slot int) error {
	in := w.inst[slot]
	w.inst[slot] = nil
	closed := make(chan struct{})
	go func() {
		in.eng.Close()
		close(closed)
	}()
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-closed:
		close(in.done)
		return nil
	case <-timer.C:
		return fmt.Errorf("instance %s: Close did not return within a minute", in.name)
	}
}

func (w *world) closeAll() {
	for slot, in := range w.inst {
		if in != nil {
			_ = w.killInstance(slot)
		}
	}
	if w.txn != nil {
		w.txn.Close()
		w.txn = nil
	}
}

// running is the instances running now.
func (w *world) running() []*instance {
	var out []*instance
	for _, in := range w.inst {
		if in != nil {
			out = append(out, in)
		}
	}
	return out
}

// faultHeld reports whether some cluster is (partly) unreachable.
func (w *world) faultHeld() bool { return w.m.srcDown || w.m.dstDown >= 0 }

// timeout is a context for one request of a step or the oracle.
func (w *world) timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.ctx, d)
}

// wait polls cond every 100 ms until it holds or d passes; it reports
// whether it held and cond's last message.
func (w *world) wait(d time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return true, ""
		}
		select {
		case <-deadline.C:
			return false, msg
		case <-w.ctx.Done():
			return false, msg + " (test ended)"
		case <-tick.C:
		}
	}
}
