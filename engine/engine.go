package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/internal/throttle"
	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/engine/wire"
)

// Config configures an engine instance. The destination cluster is the one
// the instance writes to and keeps its state on.
type Config struct {
	Destination     []string
	DestinationOpts []kgo.Opt // security settings for the destination's franz-go clients
	// DestinationTLS and DestinationSASL secure kmirror's own produce
	// connections to the destination (the same settings as DestinationOpts;
	// see SecurityParts).
	DestinationTLS  *tls.Config
	DestinationSASL sasl.Mechanism
	Instance        string // instance name, default "kmirror"
	Logger          *slog.Logger
	Now             func() time.Time // clock, default time.Now
	ConnectTimeout  time.Duration    // how long New waits for the destination, default 30s
	Jitter          func() float64   // full-jitter fraction in [0,1) for retries, default random
	// RequestTimeout is how long a destination Produce lets the broker
	// wait for its replicas (the request's TimeoutMillis), default 30s. A
	// destination broker that has not answered a request half as long
	// again after it was due is given up as hung: its connection is
	// closed and the partitions waiting on it realign on a new one.
	RequestTimeout time.Duration
	// Version and Host go into the instance's heartbeat (Join); Host
	// defaults to the machine's host name.
	Version string
	Host    string
	// HeartbeatInterval is how often a joined instance writes its
	// heartbeat to __mirror_state, default 3s.
	HeartbeatInterval time.Duration
}

// Engine mirrors partitions. It is safe for concurrent use.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	base   time.Time // the clock when the engine started, see sinceBase
	dst    *cluster
	destID string
	// dstReach is whether the destination answers the mirrors' watchers.
	dstReach reach

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	mirrors map[string]*mirror

	startups startups // partitions coming up, for the start-up summary

	conns   *replica.Conns
	sinks   *replica.Sinks  // on conns: the Produce requests of every mirror
	starter replica.Starter // the runners starting at once (replica/park.go)
	events  *eventQueue
	coord   *coordinator // nil unless the engine joined __mirror_state
	// gate holds back appends, fencing and state writes while the
	// instance may have lost its shards; always open unless it joined.
	gate *ownerGate
	// txnMax is the destination's transaction.max.timeout.ms (txnTimeout).
	txnMax txnLimit
}

// New connects to the destination cluster and returns an engine with no
// mirror running. It fails if the destination does not answer within
// ConnectTimeout.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Instance == "" {
		cfg.Instance = "kmirror"
	}
	if cfg.Logger == nil {
		cfg.Logger = logging.Discard()
	}
	// franz-go's own log goes to the same logger: every destination
	// client is made with DestinationOpts.
	dstLog := cfg.Logger.With(logging.Cluster, "destination")
	cfg.DestinationOpts = append(slices.Clone(cfg.DestinationOpts), kgo.WithLogger(logging.Kgo(dstLog)))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	dst, err := newCluster("destination", cfg.Destination, cfg.Instance, slices.Concat(cfg.DestinationOpts, []kgo.Opt{kgo.WithLogger(logging.KgoRaw(dstLog))})...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	meta, err := dst.metadata(cctx, []string{})
	if err != nil {
		dst.close()
		return nil, fmt.Errorf("destination cluster %s unreachable: %w", strings.Join(cfg.Destination, ","), err)
	}
	e := &Engine{
		cfg: cfg, log: cfg.Logger, now: cfg.Now, base: cfg.Now(), dst: dst, destID: meta.clusterID,
		mirrors: make(map[string]*mirror), gate: newGate(),
	}
	dst.gate, dst.jitter = e.gate, cfg.Jitter
	// One destination metadata cache, on the engine's clock, for every
	// mirror's routes and for listing destination offsets.
	dst.leaders = newMetaCache(dst, []string{}, cfg.Now)
	e.conns = replica.NewConns(dst.brokerAddrs, wire.Options{ClientID: cfg.Instance, TLS: cfg.DestinationTLS, SASL: cfg.DestinationSASL, ResponseTimeout: cfg.RequestTimeout / 2})
	e.sinks = replica.NewSinks(e.conns, cfg.RequestTimeout, e.gate.Allowed)
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.events = newEventQueue(e.ctx, &e.wg, 10_000)
	return e, nil
}

func (e *Engine) jitter() float64 { return e.cfg.Jitter() }

// Close stops every mirror and waits for the engine's goroutines.
func (e *Engine) Close() {
	e.cancel()
	e.wg.Wait()
	e.mu.Lock()
	for _, m := range e.mirrors {
		m.src.close()
	}
	e.mu.Unlock()
	if e.coord != nil {
		e.coord.close()
	}
	e.sinks.Close() // after the runners, whose last appends it carries
	e.conns.Close()
	e.dst.close()
}

// StartMirror runs an ad-hoc mirror that keeps no state in __mirror_state:
// it connects to the source, creates missing destination topics and starts
// mirroring every partition of cfg.Topics. Instances that share work use
// Join instead.
func (e *Engine) StartMirror(ctx context.Context, cfg MirrorConfig) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if len(cfg.Topics) == 0 {
		return fmt.Errorf("mirror %s: no topics", cfg.Name)
	}
	m, err := e.openMirror(ctx, cfg, "")
	if err != nil {
		return err
	}
	topics := slices.Clone(cfg.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	ans := m.askTopics(ctx, topics)
	for _, t := range topics {
		start := func(int32) runnerInit {
			return runnerInit{Status: partition.Status{Config: cfg.retryConfig()}, Events: []partition.Event{partition.Start{}}, LastOffset: -1, LastEpoch: -1}
		}
		if err := m.addTopic(ctx, t, start, nil, nil, ans); err != nil {
			return err
		}
	}
	e.emit(LevelInfo, cfg.Name, "", -1, fmt.Sprintf("mirror %s started: %d topics from %s", cfg.Name, len(topics), m.sourceID))
	return nil
}

// openMirror connects to a mirror's source and registers the mirror. A
// non-empty wantSourceID is the cluster id recorded when the mirror was
// created; another id fails.
func (e *Engine) openMirror(ctx context.Context, cfg MirrorConfig, wantSourceID string) (*mirror, error) {
	e.mu.Lock()
	_, dup := e.mirrors[cfg.Name]
	e.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("mirror %s is already running", cfg.Name)
	}
	srcLog := e.log.With(logging.Cluster, "source", logging.Mirror, cfg.Name)
	cfg.SourceOpts = append(slices.Clone(cfg.SourceOpts), kgo.WithLogger(logging.Kgo(srcLog)))
	src, err := newCluster("source", cfg.SourceBootstrap, e.cfg.Instance+"-"+cfg.Name, slices.Concat(cfg.SourceOpts, []kgo.Opt{kgo.WithLogger(logging.KgoRaw(srcLog))})...)
	if err != nil {
		return nil, err
	}
	src.jitter = e.cfg.Jitter
	cctx, cancel := context.WithTimeout(ctx, e.cfg.ConnectTimeout)
	defer cancel()
	meta, err := src.metadata(cctx, []string{})
	var unreachable error
	switch {
	case err != nil && wantSourceID == "":
		src.close()
		return nil, fmt.Errorf("mirror %s: source cluster %s unreachable: %w", cfg.Name, strings.Join(cfg.SourceBootstrap, ","), err)
	case err != nil:
		// A mirror recorded in __mirror_state opens from its records
		// alone: its partitions are known there, a stop needs only the
		// destination, and the others fail loudly until the source
		// answers. An instance started during an outage must be able
		// to fail over.
		unreachable = err
		meta.clusterID = wantSourceID
	}
	id := meta.clusterID
	if wantSourceID != "" && id != wantSourceID {
		id = wantSourceID // partitions compare against the recorded id and fail loudly
	}
	m := &mirror{
		e: e, cfg: cfg, src: src, sourceID: id,
		srcMeta:  newMetaCache(src, []string{}, e.now),
		dstMeta:  e.dst.leaders,
		fetchers: make(map[fetch.Key]*fetch.Fetcher[*runner]),
	}
	// The source cluster is this mirror's alone: its offsets are listed
	// with the leaders the mirror routes by, not with a second copy.
	src.leaders = m.srcMeta
	m.ctx, m.cancel = context.WithCancel(e.ctx)
	m.bucket = throttle.New(cfg.ThrottleRate, e.now)
	m.deps = newReplicaDeps(m)
	m.setLive(cfg, store.MirrorDef{})
	if unreachable != nil {
		m.srcReach.markDown(e.now(), unreachable)
		e.emit(LevelError, cfg.Name, "", -1, m.sourceDown().Error()+"; the mirror is opened from "+store.Topic+" alone: a stop needs only the destination")
	}
	e.mu.Lock()
	e.mirrors[cfg.Name] = m
	e.mu.Unlock()
	m.spawn(func() { m.watch(m.ctx) })
	// Every partition's first alignment reads the source's own
	// __mirror_state (failback): read it now, while the topics are
	// being set up, not after them (a dozen round trips to a far
	// source).
	m.spawn(func() { _, _ = m.peerCatalog(m.ctx) })
	m.spawn(func() { m.syncGroups(m.ctx) })
	m.spawn(func() { m.metaSync(m.ctx) })
	return m, nil
}

// mirrorList returns the mirrors the engine runs now, in no order.
func (e *Engine) mirrorList() []*mirror {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Values(e.mirrors))
}

// Snapshot returns a copy of the engine's state.
func (e *Engine) Snapshot() Snapshot {
	ms := e.mirrorList()
	slices.SortFunc(ms, func(a, b *mirror) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	s := Snapshot{
		Taken:       e.now(),
		Instance:    e.cfg.Instance,
		Destination: ClusterInfo{ID: e.destID, Bootstrap: e.cfg.Destination},
		DestReach:   e.dstReach.state(),
		Member:      e.membership(),
	}
	for _, m := range ms {
		mm := MirrorSnapshot{Name: m.cfg.Name, Source: ClusterInfo{ID: m.sourceID, Bootstrap: m.cfg.SourceBootstrap}}
		for _, r := range m.runners() {
			ps := r.Stats().Snapshot()
			ps.Owner = e.cfg.Instance
			ps.Progress = r.Stats().Progress(s.Taken)
			mm.Partitions = append(mm.Partitions, ps)
		}
		m.mu.Lock()
		mm.Groups, mm.ShareGroupsSkipped = slices.Clone(m.groups), m.shareSkip
		mm.GroupSyncRounds, mm.GroupSyncLast = m.groupRounds, m.groupLast
		m.mu.Unlock()
		mm.Failures, mm.Realignments = m.failures.snapshot(), m.realigns.snapshot()
		mm.Meta = m.metaStatus()
		mm.Latency = m.latency()
		mm.SourceReach = m.srcReach.state()
		if mm.SourceReach.Down {
			// No round trip: measured up to 20 s ago, it would read as
			// a live link.
			outage(mm.Partitions, mm.SourceReach, s.Taken)
		} else {
			mm.SourceRoundTrips = m.roundTrips(time.Now())
		}
		s.Mirrors = append(s.Mirrors, mm)
	}
	if c := e.coord; c != nil {
		c.addRemote(&s)
	}
	return s
}

// Events returns the channel on which the engine delivers events in order.
func (e *Engine) Events() <-chan Event { return e.events.out }

// ErrUnknownMirror is returned by Control for a mirror this engine does not run.
var ErrUnknownMirror = errors.New("unknown mirror")

// Control applies an operator command to the matching partitions. On an
// instance that joined __mirror_state the command is recorded there, exactly
// as the CLI records it, and the owners act on it. Handing the command to
// the partitions never blocks: each runner takes it from its inbox, at once
// when idle, and interrupts the work in progress for it.
func (e *Engine) Control(ctx context.Context, cmd Command) error {
	if c := e.coord; c != nil {
		return c.control(ctx, cmd)
	}
	e.mu.Lock()
	m, ok := e.mirrors[cmd.Mirror]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s %s: %w", cmd.Kind, cmd.Mirror, ErrUnknownMirror)
	}
	ev := commandEvent(cmd)
	matched := 0
	for _, r := range m.runners() {
		if len(cmd.Topics) > 0 && !slices.Contains(cmd.Topics, r.Topic()) {
			continue
		}
		matched++
		r.Send(ev)
	}
	if matched == 0 {
		return fmt.Errorf("%s %s: no partition of topics %v", cmd.Kind, cmd.Mirror, cmd.Topics)
	}
	e.emit(LevelInfo, cmd.Mirror, strings.Join(cmd.Topics, ","), -1, fmt.Sprintf("operator: %s on %d partitions", cmd.Kind, matched))
	return nil
}

// commandEvent is the state machine event of an operator command.
func commandEvent(cmd Command) partition.Event {
	switch cmd.Kind {
	case CmdPause:
		return partition.Pause{}
	case CmdResume:
		return partition.Resume{}
	case CmdRecover:
		return partition.Recover{Rebuild: cmd.Rebuild}
	case CmdStop:
		return partition.Stop{}
	}
	return partition.Start{}
}

// sinceBase is t as the time since the engine started: eight bytes where a
// time.Time takes twenty-four, keeping the monotonic clock's order.
func (e *Engine) sinceBase(t time.Time) time.Duration { return t.Sub(e.base) }

// emit records an event and logs it (logEvent): mirror "", topic "" and
// partition -1 are an event about no mirror, topic or partition.
func (e *Engine) emit(level EventLevel, mirror, topic string, p int32, msg string, attrs ...slog.Attr) {
	ev := Event{Time: e.now(), Level: level, Mirror: mirror, Topic: topic, Partition: p, Message: msg}
	logEvent(e.log, slogLevel(level), ev, attrs...)
	e.events.push(ev)
}

// deleteRecords moves a destination partition's log start to offset.
func (e *Engine) deleteRecords(ctx context.Context, topic string, p int32, offset int64) error {
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: topic, Partition: p, At: offset})
	resp, err := e.dst.adm.DeleteRecords(ctx, o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("delete records below %d on destination %s/%d: %w", offset, topic, p, err)
	}
	return nil
}
